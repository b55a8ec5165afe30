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

export function attentionForwardRef(args: AttentionRefArgs): AttentionRefForward {
  const { B, Tq, Tk, NH, NKV, HS, v } = args;
  const { vAt, outAt } = indexers(args);
  const out = new Float64Array(B * Tq * NH * HS);
  const lse = new Float64Array(B * NH * Tq);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < NH; h++) {
      const g = Math.floor(h / (NH / NKV));
      for (let t = 0; t < Tq; t++) {
        const row = probabilities(args, b, t, h);
        lse[(b * NH + h) * Tq + t] = row.lse;
        for (let j = 0; j < Tk; j++) {
          if (row.p[j] === 0) continue;
          for (let d = 0; d < HS; d++) out[outAt(b, t, h) + d] += row.p[j] * v[vAt(b, j, g) + d];
        }
      }
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
