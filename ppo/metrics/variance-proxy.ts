// verl's variance_proxy/* metrics (compute_variance_proxy_metrics, verl/trainer/ppo/metric_utils.py), logged for
// every step whose old-log-prob forward gave Σπ² (actor.calculate_sum_pi_squared): a forward-only estimate of the
// policy gradient's variance. Per sequence, the score-norm proxy W = Σ_t (1 − 2π_t + Σπ²_t)·ρ_t² over response
// tokens (π_t = exp(old log-prob), ρ the rollout IS weights when the step has them, else 1) and Ā the masked mean
// of the advantages; over the batch:
//   proxy1_signal_strength = ‖ḡ‖², the actor's gradient norm squared (verl passes actor/grad_norm; 0 without one)
//   proxy2_total_power     = mean(Ā²·max(W, 0)), or with IS weights mean(ρ̄²·Ā²·max(W/ρ², 0)), ρ̄ the masked mean of ρ
//   proxy3_pure_noise      = max(0, (proxy2 − proxy1) / (N − 1)) (0 without a gradient norm or with one sequence)
//   expected_a_squared     = mean(Ā²), expected_w = mean(W)
// Masked means divide by (token count + 1e-8) and ρ² is clamped at 1e-10 before dividing, as verl's.

export interface VarianceProxyInputs {
  /** (N, R) host copies, row-major. */
  oldLogProbs: Float32Array;
  sumPiSquared: Float32Array;
  advantages: Float32Array;
  responseMask: Float32Array;
  /** (N, R) the rollout IS weights the step computed (rollout_is), or null. */
  rolloutIsWeights: Float32Array | null;
  N: number;
  R: number;
}

/**
 * variance_proxy/* under verl's names; `gradientNorm`: the step's actor/grad_norm, null when the actor did not update.
 */
export function varianceProxyMetrics(x: VarianceProxyInputs, gradientNorm: number | null): Record<string, number> {
  const { N, R, responseMask: mask } = x;
  const rho = x.rolloutIsWeights;
  let totalPower = 0,
    expectedASquared = 0,
    expectedW = 0;
  for (let b = 0; b < N; b++) {
    let tokens = 0,
      advantageSum = 0,
      w = 0,
      wWithoutIs = 0,
      rhoSum = 0;
    for (let i = b * R; i < (b + 1) * R; i++) {
      if (!mask[i]) continue;
      const score = 1 - 2 * Math.exp(x.oldLogProbs[i]) + x.sumPiSquared[i];
      const rhoSquared = rho ? rho[i] * rho[i] : 1;
      tokens += mask[i];
      advantageSum += x.advantages[i] * mask[i];
      w += score * rhoSquared * mask[i];
      wWithoutIs += ((score * rhoSquared) / Math.max(rhoSquared, 1e-10)) * mask[i];
      if (rho) rhoSum += rho[i] * mask[i];
    }
    const meanAdvantage = advantageSum / (tokens + 1e-8);
    const aSquared = meanAdvantage * meanAdvantage;
    const meanRho = rhoSum / (tokens + 1e-8);
    totalPower += rho ? meanRho * meanRho * aSquared * Math.max(wWithoutIs, 0) : aSquared * Math.max(w, 0);
    expectedASquared += aSquared;
    expectedW += w;
  }
  const proxy2 = totalPower / N;
  const proxy1 = gradientNorm === null ? null : gradientNorm * gradientNorm;
  const proxy3 = proxy1 !== null && N > 1 ? Math.max(0, (proxy2 - proxy1) / (N - 1)) : 0;
  return {
    'variance_proxy/proxy1_signal_strength': proxy1 ?? 0,
    'variance_proxy/proxy2_total_power': proxy2,
    'variance_proxy/proxy3_pure_noise': proxy3,
    'variance_proxy/expected_a_squared': expectedASquared / N,
    'variance_proxy/expected_w': expectedW / N,
  };
}
