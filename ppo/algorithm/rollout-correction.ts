// Rollout correction's diagnostics (verl's rollout_corr_helper.compute_offpolicy_metrics): how far the log-probs the
// rollout sampled with (our fused decode kernels) drift from the training forward's recomputed old log-probs, over
// the response tokens. Host arithmetic on the (N, R) copies the experience already reads back: no extra read-back.
//   old, rollout, mask: (N, R) row-major; per-sequence means divide by (tokens + 1e-8), as verl_F.masked_mean.

/** verl clamps log-ratios to ±20 before exponentiating them (SAFETY_BOUND). */
const SAFETY_BOUND = 20;

/** rollout_corr/{training_ppl, training_log_ppl, kl, k3_kl, rollout_ppl, rollout_log_ppl, log_ppl_diff, log_ppl_abs_diff,
 *  log_ppl_diff_max, log_ppl_diff_min, ppl_ratio, chi2_token, chi2_seq}, verl's names and formulas. */
export function rolloutMismatchMetrics(old: Float32Array, rollout: Float32Array, mask: Float32Array, N: number, R: number): Record<string, number> {
  if (old.length !== N * R || rollout.length !== N * R || mask.length !== N * R) {
    throw new Error(`rolloutMismatchMetrics: old (${old.length}), rollout (${rollout.length}) and response mask (${mask.length}) must each be N·R = ${N}·${R}`);
  }
  const clamp = (x: number) => Math.min(SAFETY_BOUND, Math.max(-SAFETY_BOUND, x));
  let tokens = 0, klSum = 0, k3Sum = 0, rhoSquaredSum = 0;
  let trainingPpl = 0, trainingLogPpl = 0, rolloutPpl = 0, rolloutLogPpl = 0;
  let diffSum = 0, absDiffSum = 0, diffMax = -Infinity, diffMin = Infinity, pplRatio = 0, rhoSquaredSeq = 0;
  for (let b = 0; b < N; b++) {
    let count = 0, oldSum = 0, rolloutSum = 0, logRatioSum = 0;
    for (let t = b * R; t < (b + 1) * R; t++) {
      const m = mask[t];
      if (m === 0) continue;
      const logRatio = old[t] - rollout[t];
      count += m; oldSum += m * old[t]; rolloutSum += m * rollout[t]; logRatioSum += m * logRatio;
      klSum += m * (rollout[t] - old[t]);
      k3Sum += m * (Math.exp(logRatio) - logRatio - 1);
      rhoSquaredSum += m * Math.exp(2 * clamp(logRatio));
    }
    tokens += count;
    const meanOld = oldSum / (count + 1e-8);
    const meanRollout = rolloutSum / (count + 1e-8);
    trainingPpl += Math.exp(-meanOld); trainingLogPpl += -meanOld;
    rolloutPpl += Math.exp(-meanRollout); rolloutLogPpl += -meanRollout;
    const diff = meanRollout - meanOld;
    diffSum += diff; absDiffSum += Math.abs(diff); diffMax = Math.max(diffMax, diff); diffMin = Math.min(diffMin, diff);
    pplRatio += Math.exp(diff);
    rhoSquaredSeq += Math.exp(2 * clamp(logRatioSum));
  }
  if (tokens === 0) throw new Error('rolloutMismatchMetrics: the response mask has no token (verl: "response_mask must contain at least one valid token")');
  const tokenMean = (sum: number) => sum / (tokens + 1e-8);
  return {
    'rollout_corr/training_ppl': trainingPpl / N,
    'rollout_corr/training_log_ppl': trainingLogPpl / N,
    'rollout_corr/kl': tokenMean(klSum),
    'rollout_corr/k3_kl': tokenMean(k3Sum),
    'rollout_corr/rollout_ppl': rolloutPpl / N,
    'rollout_corr/rollout_log_ppl': rolloutLogPpl / N,
    'rollout_corr/log_ppl_diff': diffSum / N,
    'rollout_corr/log_ppl_abs_diff': absDiffSum / N,
    'rollout_corr/log_ppl_diff_max': diffMax,
    'rollout_corr/log_ppl_diff_min': diffMin,
    'rollout_corr/ppl_ratio': pplRatio / N,
    'rollout_corr/chi2_token': tokenMean(rhoSquaredSum) - 1,
    'rollout_corr/chi2_seq': rhoSquaredSeq / N - 1,
  };
}
