// verl's variance_proxy/* metrics (ppo/metrics/variance-proxy.ts) against values worked out by hand from
// compute_variance_proxy_metrics' formulas, on two sequences of two tokens (the second's last token masked).
import { describe, it, expect } from 'vitest';
import { varianceProxyMetrics } from '../../ppo/metrics/variance-proxy.ts';

// Sequence 0: π = 0.5, 0.25 and Σπ² = 0.5, 0.25, so 1 − 2π + Σπ² = 0.5, 0.75 (W = 1.25); advantages 1, 3 (Ā = 2).
// Sequence 1: π = 1, Σπ² = 1, so 0 (W = 0); advantage −2 (Ā = −2); its masked token must not count.
const inputs = {
  oldLogProbs: new Float32Array([Math.log(0.5), Math.log(0.25), 0, -3]),
  sumPiSquared: new Float32Array([0.5, 0.25, 1, 0.9]),
  advantages: new Float32Array([1, 3, -2, 5]),
  responseMask: new Float32Array([1, 1, 1, 0]),
  N: 2,
  R: 2,
};

function expectMetrics(actual: Record<string, number>, expected: Record<string, number>): void {
  expect(Object.keys(actual).sort()).toEqual(
    Object.keys(expected)
      .map((k) => `variance_proxy/${k}`)
      .sort(),
  );
  for (const [key, value] of Object.entries(expected))
    expect(actual[`variance_proxy/${key}`], key).toBeCloseTo(value, 6);
}

describe('variance_proxy/* metrics', () => {
  it("on-policy: E[Ā²·W], and the noise term from the actor's gradient norm", () => {
    // proxy2 = (4·1.25 + 4·0) / 2; proxy1 = 1²; proxy3 = (2.5 − 1) / (2 − 1).
    expectMetrics(varianceProxyMetrics({ ...inputs, rolloutIsWeights: null }, 1), {
      proxy1_signal_strength: 1,
      proxy2_total_power: 2.5,
      proxy3_pure_noise: 1.5,
      expected_a_squared: 4,
      expected_w: 0.625,
    });
    // No actor update (critic warmup): verl logs 0 for the two terms that need the gradient norm.
    expectMetrics(varianceProxyMetrics({ ...inputs, rolloutIsWeights: null }, null), {
      proxy1_signal_strength: 0,
      proxy2_total_power: 2.5,
      proxy3_pure_noise: 0,
      expected_a_squared: 4,
      expected_w: 0.625,
    });
    // A gradient norm larger than the total power: the noise estimate is clamped at 0.
    expect(varianceProxyMetrics({ ...inputs, rolloutIsWeights: null }, 2)['variance_proxy/proxy3_pure_noise']).toBe(0);
  });

  it('with rollout IS weights ρ: W takes ρ², total power E[ρ̄²·Ā²·W/ρ²]', () => {
    // ρ = 2, 1 and 0.5: W = 0.5·4 + 0.75·1 = 2.75 and 0; ρ̄ = 1.5 and 0.5; W/ρ² = 1.25 and 0;
    // proxy2 = (1.5²·4·1.25 + 0.5²·4·0) / 2 = 5.625.
    expectMetrics(varianceProxyMetrics({ ...inputs, rolloutIsWeights: new Float32Array([2, 1, 0.5, 9]) }, null), {
      proxy1_signal_strength: 0,
      proxy2_total_power: 5.625,
      proxy3_pure_noise: 0,
      expected_a_squared: 4,
      expected_w: 1.375,
    });
  });
});
