// CPU reference of kernels/decode/sample (float64). The kept set is computed the way Hugging Face's TopK and TopP
// warpers do it — sort, cumulative probabilities — an independent check of the kernel's bit-by-bit threshold
// search; the Gumbel noise is the kernel's pcg4d stream, reproduced with exact 32-bit integer arithmetic.
// logits (rows·rowStride, V); per-row outputs (rows). Sampling has no backward: the log-prob's gradient is the
// LM head's (kernels/layers/lm-head.ref.ts).
import type { RowSampling } from './sample.ts';

export interface SampleRefArgs {
  logits: ArrayLike<number>;
  V: number;
  rows: number;
  rowStride?: number;
  rowOffset?: number;
  eosIds: readonly number[];
  /** Per row, its random stream and sampling parameters (outRow is the kernel's output address only). */
  rowSampling: readonly RowSampling[];
  finished: ArrayLike<number>;
  /** Per row, its step (the random stream's). */
  steps: ArrayLike<number>;
  padId: number;
}

export interface SampleRefResult {
  ids: Uint32Array;
  logprobs: Float64Array;
  finished: Uint32Array;
  /** Per row, the score (logit − max) / T + gumbel of every kept token (−∞ elsewhere); empty when greedy. */
  scores: Float64Array[];
}

/** pcg4d of Jarzynski & Olano (JCGT 2020) on four u32 lanes, as the kernel computes it. */
export function pcg4d(x: number, y: number, z: number, w: number): [number, number, number, number] {
  let a = (Math.imul(x, 1664525) + 1013904223) >>> 0;
  let b = (Math.imul(y, 1664525) + 1013904223) >>> 0;
  let c = (Math.imul(z, 1664525) + 1013904223) >>> 0;
  let d = (Math.imul(w, 1664525) + 1013904223) >>> 0;
  const mix = () => {
    a = (a + Math.imul(b, d)) >>> 0;
    b = (b + Math.imul(c, a)) >>> 0;
    c = (c + Math.imul(a, b)) >>> 0;
    d = (d + Math.imul(b, c)) >>> 0;
  };
  mix();
  a ^= a >>> 16;
  b ^= b >>> 16;
  c ^= c >>> 16;
  d ^= d >>> 16;
  mix();
  return [a >>> 0, b >>> 0, c >>> 0, d >>> 0];
}

export function gumbelNoise(token: number, stream: number, step: number, seed: number): number {
  const bits = pcg4d(token, stream, step, seed >>> 0)[0];
  const u = ((bits >>> 8) + 0.5) / 16777216;
  return -Math.log(-Math.log(u));
}

/** Whether each token survives top-k then top-p (HF warper order and tie rules), as a 0/1 mask over V. */
export function keptTokens(logits: ArrayLike<number>, temperature: number, topK: number, topP: number): Uint8Array {
  const V = logits.length;
  const kept = new Uint8Array(V).fill(1);
  const order = Array.from({ length: V }, (_, v) => v).sort((i, j) => logits[j] - logits[i]);
  if (topK > 0 && topK < V) {
    // TopKLogitsWarper: remove logits < the k-th largest, so ties with it stay.
    const kth = logits[order[topK - 1]];
    for (let v = 0; v < V; v++) if (logits[v] < kth) kept[v] = 0;
  }
  if (topP < 1) {
    const survivors = order.filter((v) => kept[v]);
    const max = logits[survivors[0]];
    const weights = survivors.map((v) => Math.exp((logits[v] - max) / temperature));
    const total = weights.reduce((s, w) => s + w, 0);
    // TopPLogitsWarper: drop a token when the mass strictly above its value already reaches top_p; equal
    // logits share one fate, as a value threshold gives them.
    let above = 0;
    for (let i = 0; i < survivors.length; ) {
      let j = i;
      let tied = 0;
      while (j < survivors.length && logits[survivors[j]] === logits[survivors[i]]) tied += weights[j++];
      if (above / total >= topP) for (let t = i; t < j; t++) kept[survivors[t]] = 0;
      above += tied;
      i = j;
    }
  }
  return kept;
}

export function sampleRef(a: SampleRefArgs): SampleRefResult {
  const { logits, V, rows, eosIds, rowSampling, steps, padId } = a;
  const rowStride = a.rowStride ?? 1;
  const rowOffset = a.rowOffset ?? 0;
  const ids = new Uint32Array(rows);
  const logprobs = new Float64Array(rows);
  const finished = new Uint32Array(rows);
  const scores: Float64Array[] = [];
  for (let r = 0; r < rows; r++) {
    scores.push(new Float64Array(0));
    if (a.finished[r]) {
      ids[r] = padId;
      finished[r] = 1;
      continue;
    }
    const { stream, seed, temperature, topK, topP } = rowSampling[r];
    const base = (r * rowStride + rowOffset) * V;
    const row = Array.from({ length: V }, (_, v) => logits[base + v]);
    let argmax = 0;
    for (let v = 1; v < V; v++) if (row[v] > row[argmax]) argmax = v;
    const greedy = temperature <= 0;
    const invT = greedy ? 1 : 1 / temperature;
    let total = 0;
    for (const x of row) total += Math.exp((x - row[argmax]) * invT);
    let chosen = argmax;
    if (!greedy) {
      const kept = keptTokens(row, temperature, topK, topP);
      const s = new Float64Array(V).fill(-Infinity);
      for (let v = 0; v < V; v++)
        if (kept[v]) s[v] = (row[v] - row[argmax]) * invT + gumbelNoise(v, stream, steps[r], seed);
      chosen = 0;
      for (let v = 1; v < V; v++) if (s[v] > s[chosen]) chosen = v;
      scores[r] = s;
    }
    ids[r] = chosen;
    logprobs[r] = (row[chosen] - row[argmax]) * invT - Math.log(total);
    finished[r] = eosIds.includes(chosen) ? 1 : 0;
  }
  return { ids, logprobs, finished, scores };
}
