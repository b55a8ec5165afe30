// CPU reference of kernels/attention/attention: causal grouped-query attention with a key padding mask, in float64.
// q(b,t,h,d), k(b,j,g,d), v(b,j,g,d) are read through the strides of AttentionDims (fused qkv or a KV cache);
// out [B*Tq, NH*HS], lse [B, NH, Tq]. Query t sits at key position queryStart + t and attends key j iff
// j <= queryStart + t and keyMask[b, j] == 1; head h reads kv group floor(h / (NH/NKV)).
// A query with no allowed key gets out = 0, lse = 0 and no gradient (the GPU kernel's convention).
// The softmax is explicit (scores, max, exponentials, sum): an independent check of the online softmax.
import type { AttentionDims } from './attention.ts';

export interface AttentionRefArgs extends AttentionDims {
  q: ArrayLike<number>;
  k: ArrayLike<number>;
  v: ArrayLike<number>;
  keyMask: ArrayLike<number>;
}

export interface AttentionRefForward {
  out: Float64Array;
  lse: Float64Array;
}

/** Gradients shaped like the q, k and v arrays (zero outside the elements attention reads). */
export interface AttentionRefGrads {
  dq: Float64Array;
  dk: Float64Array;
  dv: Float64Array;
}

function indexers(a: AttentionDims) {
  const { Tq, HS } = a;
  return {
    qAt: (b: number, t: number, h: number) => a.qColOffset + (b * Tq + t) * a.qRowStride + h * HS,
    kAt: (b: number, j: number, g: number) => a.kColOffset + b * a.kvBatchStride + j * a.kRowStride + g * HS,
    vAt: (b: number, j: number, g: number) => a.vColOffset + b * a.kvBatchStride + j * a.vRowStride + g * HS,
    outAt: (b: number, t: number, h: number) => ((b * Tq + t) * a.NH + h) * HS,
    allowed: (mask: ArrayLike<number>, b: number, t: number, j: number) =>
      j <= a.queryStart + t && mask[b * (a.maskBatchStride ?? a.Tk) + j] === 1,
  };
}

/** Softmax probabilities of query (b,t,h) over all Tk keys (0 where not allowed) and their logsumexp. */
function probabilities(args: AttentionRefArgs, b: number, t: number, h: number): { p: Float64Array; lse: number } {
  const { Tk, HS, NH, NKV, scale, q, k, keyMask } = args;
  const { qAt, kAt, allowed } = indexers(args);
  const g = Math.floor(h / (NH / NKV));
  const scores = new Float64Array(Tk).fill(-Infinity);
  let max = -Infinity;
  for (let j = 0; j < Tk; j++) {
    if (!allowed(keyMask, b, t, j)) continue;
    let dot = 0;
    for (let d = 0; d < HS; d++) dot += q[qAt(b, t, h) + d] * k[kAt(b, j, g) + d];
    scores[j] = scale * dot;
    max = Math.max(max, scores[j]);
  }
  const p = new Float64Array(Tk);
  if (max === -Infinity) return { p, lse: 0 };
  let sum = 0;
  for (let j = 0; j < Tk; j++) {
    p[j] = Math.exp(scores[j] - max);
    sum += p[j];
  }
  for (let j = 0; j < Tk; j++) p[j] /= sum;
  return { p, lse: max + Math.log(sum) };
}

/** One query row: batch b, query t, head h. */
export interface AttentionQuery {
  b: number;
  t: number;
  h: number;
}

/** One key row: batch b, key j, kv group g. */
export interface AttentionKey {
  b: number;
  j: number;
  g: number;
}

function allQueries({ B, Tq, NH }: AttentionDims): AttentionQuery[] {
  const queries: AttentionQuery[] = [];
  for (let b = 0; b < B; b++) for (let h = 0; h < NH; h++) for (let t = 0; t < Tq; t++) queries.push({ b, t, h });
  return queries;
}

/** out and lse of `queries` (every query when absent; the other rows stay 0), each over the whole key range: a
 *  sample of rows is O(Tk·HS) each where the whole is O(B·NH·Tq·Tk·HS) (gpu-report's real-size check). */
export function attentionForwardRef(
  args: AttentionRefArgs,
  queries: readonly AttentionQuery[] = allQueries(args),
): AttentionRefForward {
  const { B, Tq, Tk, NH, NKV, HS, v } = args;
  const { vAt, outAt } = indexers(args);
  const out = new Float64Array(B * Tq * NH * HS);
  const lse = new Float64Array(B * NH * Tq);
  for (const { b, t, h } of queries) {
    const g = Math.floor(h / (NH / NKV));
    const row = probabilities(args, b, t, h);
    lse[(b * NH + h) * Tq + t] = row.lse;
    for (let j = 0; j < Tk; j++) {
      if (row.p[j] === 0) continue;
      for (let d = 0; d < HS; d++) out[outAt(b, t, h) + d] += row.p[j] * v[vAt(b, j, g) + d];
    }
  }
  return { out, lse };
}

/** Gradients of Σ dOut∘out with respect to q, k and v (dS = P∘(dP − rowsum(dOut∘out))). */
export function attentionBackwardRef(args: AttentionRefArgs & { dOut: ArrayLike<number> }): AttentionRefGrads {
  const { B, Tq, Tk, NH, NKV, HS, scale, q, k, v, dOut } = args;
  const { qAt, kAt, vAt, outAt } = indexers(args);
  const { out } = attentionForwardRef(args);
  const dq = new Float64Array(q.length);
  const dk = new Float64Array(k.length);
  const dv = new Float64Array(v.length);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < NH; h++) {
      const g = Math.floor(h / (NH / NKV));
      for (let t = 0; t < Tq; t++) {
        const { p } = probabilities(args, b, t, h);
        const o = outAt(b, t, h);
        let delta = 0;
        for (let d = 0; d < HS; d++) delta += dOut[o + d] * out[o + d];
        for (let j = 0; j < Tk; j++) {
          if (p[j] === 0) continue;
          let dp = 0;
          for (let d = 0; d < HS; d++) dp += dOut[o + d] * v[vAt(b, j, g) + d];
          const dScore = p[j] * (dp - delta) * scale;
          for (let d = 0; d < HS; d++) {
            dv[vAt(b, j, g) + d] += p[j] * dOut[o + d];
            dq[qAt(b, t, h) + d] += dScore * k[kAt(b, j, g) + d];
            dk[kAt(b, j, g) + d] += dScore * q[qAt(b, t, h) + d];
          }
        }
      }
    }
  }
  return { dq, dk, dv };
}

/**
 * dq of `queries` and dk, dv of `keys`, from what the backward kernel takes: the forward's out and lse are inputs, as
 * the kernel reads them, not recomputed. That makes a key's gradient O(NH/NKV · Tq · HS) (a column of P needs every
 * row's lse) where recomputing lse would cost the whole forward; the forward's outputs have their own check. Each
 * returned row is HS values, in the order asked.
 */
export function attentionBackwardAtRef(
  args: AttentionRefArgs & { dOut: ArrayLike<number>; out: ArrayLike<number>; lse: ArrayLike<number> },
  at: { queries: readonly AttentionQuery[]; keys: readonly AttentionKey[] },
): { dq: Float64Array[]; dk: Float64Array[]; dv: Float64Array[] } {
  const { Tq, Tk, NH, NKV, HS, scale, q, k, v, dOut, out, lse, keyMask } = args;
  const { qAt, kAt, vAt, outAt, allowed } = indexers(args);
  const dot = (x: ArrayLike<number>, i: number, y: ArrayLike<number>, j: number) => {
    let sum = 0;
    for (let d = 0; d < HS; d++) sum += x[i + d] * y[j + d];
    return sum;
  };
  // P[t, j], dP[t, j] − rowsum(dOut∘out)[t] of query row (b, t, h) against key j of its group g.
  const entry = (b: number, t: number, h: number, j: number, g: number) => {
    const p = Math.exp(scale * dot(q, qAt(b, t, h), k, kAt(b, j, g)) - lse[(b * NH + h) * Tq + t]);
    const o = outAt(b, t, h);
    return { p, dScore: p * (dot(dOut, o, v, vAt(b, j, g)) - dot(dOut, o, out, o)) * scale };
  };
  const dq = at.queries.map(({ b, t, h }) => {
    const g = Math.floor(h / (NH / NKV));
    const row = new Float64Array(HS);
    for (let j = 0; j < Tk; j++) {
      if (!allowed(keyMask, b, t, j)) continue;
      const { dScore } = entry(b, t, h, j, g);
      for (let d = 0; d < HS; d++) row[d] += dScore * k[kAt(b, j, g) + d];
    }
    return row;
  });
  const dk: Float64Array[] = [];
  const dv: Float64Array[] = [];
  for (const { b, j, g } of at.keys) {
    const dkRow = new Float64Array(HS);
    const dvRow = new Float64Array(HS);
    for (let h = g * (NH / NKV); h < (g + 1) * (NH / NKV); h++) {
      for (let t = 0; t < Tq; t++) {
        if (!allowed(keyMask, b, t, j)) continue;
        const { p, dScore } = entry(b, t, h, j, g);
        for (let d = 0; d < HS; d++) {
          dvRow[d] += p * dOut[outAt(b, t, h) + d];
          dkRow[d] += dScore * q[qAt(b, t, h) + d];
        }
      }
    }
    dk.push(dkRow);
    dv.push(dvRow);
  }
  return { dq, dk, dv };
}

/** One query's attention over a range of keys: its output row (HS), log-sum-exp, and whether any key was allowed. */
export interface AttentionStateRef {
  out: ArrayLike<number>;
  lse: number;
  seen: boolean;
}

/** Two states of one query over disjoint key ranges merged by their log-sum-exp into the state over both
 *  (attention-merge.wgsl, the math of decode-attention-combine.wgsl for normalised states); a state that saw no key
 *  (out 0, lse 0) leaves the other as it is. */
export function mergeAttentionStatesRef(a: AttentionStateRef, c: AttentionStateRef): AttentionStateRef {
  if (!c.seen) return a;
  if (!a.seen) return c;
  const max = Math.max(a.lse, c.lse);
  const wa = Math.exp(a.lse - max);
  const wc = Math.exp(c.lse - max);
  return {
    out: Float64Array.from(a.out, (x, d) => (x * wa + c.out[d] * wc) / (wa + wc)),
    lse: max + Math.log(wa + wc),
    seen: true,
  };
}
