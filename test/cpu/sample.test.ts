// The sampling reference has no backward (the log-prob's gradient is the LM head's, checked in lm-head.test.ts);
// these checks pin the reference itself: its draws follow softmax(logits / T), its kept sets are HF's, and its
// log-probs are the full temperature-scaled log-softmax.
import { describe, it, expect } from 'vitest';
import { sampleRef, keptTokens, pcg4d } from '../../kernels/decode/sample.ref.ts';
import { randomArray } from '../support/arrays.ts';

/** χ² statistic of observed counts against probabilities. */
function chiSquare(counts: number[], probabilities: number[], draws: number): number {
  let stat = 0;
  counts.forEach((observed, i) => {
    const expected = probabilities[i] * draws;
    stat += (observed - expected) ** 2 / expected;
  });
  return stat;
}

function softmax(logits: ArrayLike<number>, temperature: number): number[] {
  const max = Math.max(...Array.from(logits));
  const w = Array.from(logits, (x) => Math.exp((x - max) / temperature));
  const total = w.reduce((s, x) => s + x, 0);
  return w.map((x) => x / total);
}

describe('sample reference', () => {
  it('pcg4d gives uniform bits', () => {
    const buckets = new Array<number>(16).fill(0);
    const n = 32000;
    for (let i = 0; i < n; i++) buckets[pcg4d(i, 7, 3, 12345)[0] >>> 28]++;
    // χ² with 15 degrees of freedom: 37.7 is the 0.999 quantile.
    expect(chiSquare(buckets, new Array(16).fill(1 / 16), n)).toBeLessThan(37.7);
  });

  it('draws at temperature 1 and 0.7 follow the softmax (χ² test)', () => {
    const V = 8;
    const row = randomArray(V, 3, 2);
    for (const temperature of [1, 0.7]) {
      const draws = 20000;
      const logits = new Float32Array(draws * V);
      for (let r = 0; r < draws; r++) logits.set(row, r * V);
      const { ids, logprobs } = sampleRef({
        logits,
        V,
        rows: draws,
        eosIds: [],
        rowSampling: Array.from({ length: draws }, (_, r) => ({
          stream: r,
          outRow: r,
          seed: 99,
          temperature,
          topK: -1,
          topP: 1,
        })),
        finished: new Uint32Array(draws),
        steps: new Uint32Array(draws).fill(5),
        padId: 0,
      });
      const counts = new Array<number>(V).fill(0);
      for (const id of ids) counts[id]++;
      const p = softmax(row, temperature);
      // 7 degrees of freedom: 24.3 is the 0.999 quantile.
      expect(chiSquare(counts, p, draws)).toBeLessThan(24.3);
      for (let r = 0; r < 50; r++) expect(logprobs[r]).toBeCloseTo(Math.log(p[ids[r]]), 10);
    }
  });

  it('top-k keeps the k largest with ties; top-p keeps the smallest prefix reaching p of the top-k mass', () => {
    const logits = [0.5, 3, -1, 3, 2, 0.5, -4, 1];
    expect(Array.from(keptTokens(logits, 1, 2, 1))).toEqual([0, 1, 0, 1, 0, 0, 0, 0]);
    // ties at the k-th value all stay (HF removes only logits below it)
    expect(Array.from(keptTokens(logits, 1, 5, 1))).toEqual([1, 1, 0, 1, 1, 1, 0, 1]);
    expect(Array.from(keptTokens(logits, 1, -1, 1)).every((k) => k === 1)).toBe(true);
    const p = softmax(logits, 0.8);
    const sorted = [...p].sort((a, b) => b - a);
    for (const topP of [0.05, 0.5, 0.8, 0.95, 0.999]) {
      const kept = keptTokens(logits, 0.8, -1, topP);
      // a token stays iff the mass strictly above its value is below topP
      p.forEach((pv, v) => {
        const above = sorted.filter((q) => q > pv).reduce((s, q) => s + q, 0);
        expect(kept[v]).toBe(above < topP ? 1 : 0);
      });
    }
    // top-p after top-k renormalises over the top-k set
    const topK3 = keptTokens(logits, 1, 3, 1);
    const both = keptTokens(logits, 1, 3, 0.9);
    const pk = softmax([3, 3, 2], 1);
    expect(pk[0] + pk[1]).toBeLessThan(0.9);
    expect(Array.from(both)).toEqual(Array.from(topK3));
  });

  it('greedy takes the first maximum; finished rows emit pad; eos finishes', () => {
    const V = 5;
    const logits = new Float32Array([1, 4, 4, 0, 2, 9, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    const r = sampleRef({
      logits,
      V,
      rows: 3,
      eosIds: [5, 0],
      rowSampling: new Array(3).fill({ stream: 0, outRow: 0, seed: 1, temperature: 0, topK: -1, topP: 1 }),
      finished: new Uint32Array([0, 0, 1]),
      steps: new Uint32Array(3),
      padId: 7,
    });
    expect(Array.from(r.ids)).toEqual([1, 0, 7]);
    expect(Array.from(r.finished)).toEqual([0, 1, 1]);
    expect(r.logprobs[0]).toBeCloseTo(Math.log(softmax([1, 4, 4, 0, 2], 1)[1]), 12);
  });
});
