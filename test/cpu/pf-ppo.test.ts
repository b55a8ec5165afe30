// PF-PPO's sequence weights (ppo/algorithm/pf-ppo.ts) against verl's compute_pf_ppo_reweight_data, and the seeded
// draws with replacement that replace its torch.multinomial.
import { describe, it, expect } from 'vitest';
import { Rng } from '../../engine/rng.ts';
import { drawWithReplacement, pfPpoSample, pfPpoWeights } from '../../ppo/algorithm/pf-ppo.ts';
import { expectClose } from '../support/arrays.ts';

/**
 * token_level_scores summed per row: ties at the highest score (rows 3, 5) and the lowest (rows 1, 4), a zero (row 2).
 */
const SCORES = [0.5, -1.0, 0.0, 2.0, -1.0, 2.0, 0.25, 1.5];

// Golden weights from verl's compute_weights and clamp (verl/trainer/ppo/core_algos.py at b178a3cd) with its torch
// ops ported to numpy, float64 (python3, numpy):
//   pow: np.power(np.abs(s), p); max_min: np.where((s == s.max()) | (s == s.min()), 1.0, 0.0);
//   max_random: np.where(s == s.max(), 0.4, 0.1); then np.clip(w + 1e-8, 1e-8, None), printed with repr().
const GOLDEN: [string, number, number[]][] = [
  ['pow', 2.0, [0.25000001, 1.00000001, 1e-8, 4.00000001, 1.00000001, 4.00000001, 0.06250001, 2.25000001]],
  [
    'pow',
    0.5,
    [
      0.7071067911865476, 1.00000001, 1e-8, 1.414213572373095, 1.00000001, 1.414213572373095, 0.50000001,
      1.2247448813915889,
    ],
  ],
  ['pow', 3.0, [0.12500001, 1.00000001, 1e-8, 8.00000001, 1.00000001, 8.00000001, 0.01562501, 3.37500001]],
  ['max_min', 2.0, [1e-8, 1.00000001, 1e-8, 1.00000001, 1.00000001, 1.00000001, 1e-8, 1e-8]],
  ['max_random', 2.0, [0.10000001, 0.10000001, 0.10000001, 0.40000001, 0.10000001, 0.40000001, 0.10000001, 0.10000001]],
];

describe('PF-PPO weights', () => {
  for (const [method, weightPow, expected] of GOLDEN) {
    it(`${method}${method === 'pow' ? ` (weight_pow ${weightPow})` : ''} gives verl's weights`, () => {
      expectClose(pfPpoWeights(SCORES, method, weightPow), expected, 0, 1e-15, method);
    });
  }

  it("floor every weight at 1e-8, so a zero score (or a score between max_min's extremes) can still be drawn", () => {
    for (const [method, weightPow] of GOLDEN)
      expect(Math.min(...pfPpoWeights(SCORES, method, weightPow))).toBeGreaterThanOrEqual(1e-8);
    expect(pfPpoWeights(SCORES, 'pow', 2)[2]).toBe(1e-8);
    expect(pfPpoWeights(SCORES, 'max_min', 2)[0]).toBe(1e-8);
    // One score is both the highest and the lowest: max_min weighs every row 1.
    expect([...pfPpoWeights([0, 0, 0], 'max_min', 2)]).toEqual([1 + 1e-8, 1 + 1e-8, 1 + 1e-8]);
  });

  it("refuses an unknown method with verl's message, and a weight that is not finite", () => {
    expect(() => pfPpoWeights(SCORES, 'max', 2)).toThrow('Unsupported reweight_method: max');
    expect(() => pfPpoWeights(SCORES, 'pow', -1)).toThrow(
      /algorithm\.pf_ppo\.weight_pow=-1: sequence 2's weight \|0\|\^-1 is Infinity/,
    );
  });
});

describe('PF-PPO draws', () => {
  it('draw each index in proportion to its weight, from the seeded generator', () => {
    const weights = Float64Array.from([1, 3, 1e-8, 6]);
    const draws = drawWithReplacement(weights, 20_000, new Rng(7));
    expect(drawWithReplacement(weights, 20_000, new Rng(7))).toEqual(draws);
    const counts = [0, 1, 2, 3].map((i) => draws.filter((d) => d === i).length / draws.length);
    expectClose(counts, [0.1, 0.3, 0, 0.6], 0.015, 0, 'frequencies');
  });

  it('resample the batch to its own size and count the distinct rows kept', () => {
    const { indices, metrics } = pfPpoSample(SCORES, { reweightMethod: 'max_min', weightPow: 2 }, new Rng(3));
    expect(indices).toHaveLength(SCORES.length);
    // max_min: only the highest and lowest scores carry weight beside the 1e-8 floor.
    for (const i of indices) expect([1, 3, 4, 5]).toContain(i);
    expect(metrics['pf_ppo/distinct_rows']).toBe(new Set(indices).size);
    expect(metrics['pf_ppo/distinct_rows']).toBeLessThanOrEqual(4);
  });
});
