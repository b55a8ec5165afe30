// Rollout correction's drift metrics against verl's rollout_corr_helper.compute_offpolicy_metrics, worked by hand
// on two sequences whose log-probs are logs of powers of two (masked slots hold values that must not count).
import { describe, it, expect } from 'vitest';
import { rolloutMismatchMetrics } from '../../ppo/algorithm/rollout-correction.ts';

const ln2 = Math.log(2);

describe('rollout_corr/* mismatch metrics (verl compute_offpolicy_metrics)', () => {
  // Row 0: training p = (1/2, 1/4), rollout p = (1/4, 1/4), third slot masked. Row 1: one token, both p = 1/2.
  const old = Float32Array.from([-ln2, -2 * ln2, 100, -ln2, 7, -7]);
  const rollout = Float32Array.from([-2 * ln2, -2 * ln2, -100, -ln2, 3, 9]);
  const mask = Float32Array.from([1, 1, 0, 1, 0, 0]);
  const m = rolloutMismatchMetrics(old, rollout, mask, 2, 3);
  // Token log-ratios (old − rollout) over the 3 tokens: ln2, 0, 0; sequence sums: ln2, 0.
  // Per-sequence mean log-probs: training −1.5·ln2, −ln2; rollout −2·ln2, −ln2.
  const expected: Record<string, number> = {
    'rollout_corr/kl': -ln2 / 3,
    'rollout_corr/k3_kl': (2 - ln2 - 1) / 3,
    'rollout_corr/training_ppl': (2 ** 1.5 + 2) / 2,
    'rollout_corr/training_log_ppl': (1.5 * ln2 + ln2) / 2,
    'rollout_corr/rollout_ppl': (4 + 2) / 2,
    'rollout_corr/rollout_log_ppl': (2 * ln2 + ln2) / 2,
    'rollout_corr/log_ppl_diff': (-0.5 * ln2 + 0) / 2,
    'rollout_corr/log_ppl_abs_diff': 0.25 * ln2,
    'rollout_corr/log_ppl_diff_max': 0,
    'rollout_corr/log_ppl_diff_min': -0.5 * ln2,
    'rollout_corr/ppl_ratio': (2 ** -0.5 + 1) / 2,
    'rollout_corr/chi2_token': (4 + 1 + 1) / 3 - 1,
    'rollout_corr/chi2_seq': (4 + 1) / 2 - 1,
  };

  it('gives verl\'s names and values', () => {
    expect(Object.keys(m).sort()).toEqual(Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) expect(m[key], key).toBeCloseTo(value, 5);
  });

  it('is zero drift when the rollout and the training forward agree', () => {
    const same = rolloutMismatchMetrics(old, old, mask, 2, 3);
    for (const key of ['kl', 'k3_kl', 'log_ppl_diff', 'log_ppl_abs_diff', 'chi2_token', 'chi2_seq']) expect(same[`rollout_corr/${key}`], key).toBeCloseTo(0, 6);
    expect(same['rollout_corr/ppl_ratio']).toBeCloseTo(1, 6);
  });

  it('clamps log-ratios at ±20 (verl SAFETY_BOUND) in the χ² terms', () => {
    const c = rolloutMismatchMetrics(Float32Array.from([0]), Float32Array.from([-30]), Float32Array.from([1]), 1, 1);
    expect(c['rollout_corr/chi2_token']).toBeCloseTo(Math.exp(40) - 1, -10);
    expect(c['rollout_corr/chi2_seq']).toBeCloseTo(Math.exp(40) - 1, -10);
    expect(c['rollout_corr/kl']).toBeCloseTo(-30, 4);
  });

  it('refuses an empty response mask and mismatched shapes, as verl does', () => {
    expect(() => rolloutMismatchMetrics(old, rollout, new Float32Array(6), 2, 3)).toThrow(/at least one valid token/);
    expect(() => rolloutMismatchMetrics(old, rollout.subarray(0, 3), mask, 2, 3)).toThrow(/N·R/);
  });
});
