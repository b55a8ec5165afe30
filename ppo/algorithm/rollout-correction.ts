// Rollout correction's diagnostics (verl's rollout_corr_helper.compute_offpolicy_metrics): how far the log-probs the
// rollout sampled with (our fused decode kernels) drift from the training forward's recomputed old log-probs, over
// the response tokens. Host arithmetic on the (N, R) copies the experience already reads back: no extra read-back.
//   old, rollout, mask: (N, R) row-major; per-sequence means divide by (tokens + 1e-8), as verl_F.masked_mean.
import { parseRolloutIsThreshold, type RolloutRsCriterion } from '../config/rollout-rs-spec.ts';

/** verl clamps log-ratios to ±20 before exponentiating them (SAFETY_BOUND). */
const SAFETY_BOUND = 20;

/**
 * rollout_corr/{training_ppl, training_log_ppl, kl, k3_kl, rollout_ppl, rollout_log_ppl, log_ppl_diff,
 * log_ppl_abs_diff,
 *  log_ppl_diff_max, log_ppl_diff_min, ppl_ratio, chi2_token, chi2_seq}, verl's names and formulas. */
export function rolloutMismatchMetrics(
  old: Float32Array,
  rollout: Float32Array,
  mask: Float32Array,
  N: number,
  R: number,
): Record<string, number> {
  if (old.length !== N * R || rollout.length !== N * R || mask.length !== N * R) {
    throw new Error(
      `rolloutMismatchMetrics: old (${old.length}), rollout (${rollout.length}) and response mask (${mask.length}) ` +
        `must each be N·R = ${N}·${R}`,
    );
  }
  const clamp = (x: number) => Math.min(SAFETY_BOUND, Math.max(-SAFETY_BOUND, x));
  let tokens = 0,
    klSum = 0,
    k3Sum = 0,
    rhoSquaredSum = 0;
  let trainingPpl = 0,
    trainingLogPpl = 0,
    rolloutPpl = 0,
    rolloutLogPpl = 0;
  let diffSum = 0,
    absDiffSum = 0,
    diffMax = -Infinity,
    diffMin = Infinity,
    pplRatio = 0,
    rhoSquaredSeq = 0;
  for (let b = 0; b < N; b++) {
    let count = 0,
      oldSum = 0,
      rolloutSum = 0,
      logRatioSum = 0;
    for (let t = b * R; t < (b + 1) * R; t++) {
      const m = mask[t];
      if (m === 0) continue;
      const logRatio = old[t] - rollout[t];
      count += m;
      oldSum += m * old[t];
      rolloutSum += m * rollout[t];
      logRatioSum += m * logRatio;
      klSum += m * (rollout[t] - old[t]);
      k3Sum += m * (Math.exp(logRatio) - logRatio - 1);
      rhoSquaredSum += m * Math.exp(2 * clamp(logRatio));
    }
    tokens += count;
    const meanOld = oldSum / (count + 1e-8);
    const meanRollout = rolloutSum / (count + 1e-8);
    trainingPpl += Math.exp(-meanOld);
    trainingLogPpl += -meanOld;
    rolloutPpl += Math.exp(-meanRollout);
    rolloutLogPpl += -meanRollout;
    const diff = meanRollout - meanOld;
    diffSum += diff;
    absDiffSum += Math.abs(diff);
    diffMax = Math.max(diffMax, diff);
    diffMin = Math.min(diffMin, diff);
    pplRatio += Math.exp(diff);
    rhoSquaredSeq += Math.exp(2 * clamp(logRatioSum));
  }
  if (tokens === 0)
    throw new Error(
      'rolloutMismatchMetrics: the response mask has no token (verl: "response_mask must contain at least one valid ' +
        'token")',
    );
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

export type RolloutIsLevel = 'token' | 'sequence';

/** verl's compute_is_metrics (1dda039b) of the applied weights `applied` (N, R) and the raw ones `raw` (before TIS or
 *  IcePop): token-level mean, max and min of the applied weights and high/low fractions of the raw; sequence-level
 *  max/min/fractions from each sequence's summed log-ratio `seqLogs`; std and ESS over the applied weights clamped
 *  to [0, upper]; per-sequence means of the applied weights, their high/low fractions from the raw ones. verl
 *  b178a3cd (`fromApplied` false) measured the raw weights throughout, std and ESS clamped to [lower, upper]. */
function ratioMetrics(
  prefix: string,
  applied: Float32Array,
  raw: Float32Array,
  mask: Float32Array,
  N: number,
  R: number,
  seqLogs: Float64Array | null,
  upper: number,
  lower: number,
  fromApplied: boolean,
): Record<string, number> {
  const name = (key: string) => `rollout_corr/${prefix}_${key}`;
  const weights = fromApplied ? applied : raw;
  let tokens = 0,
    sum = 0,
    high = 0,
    low = 0,
    max = -Infinity,
    min = Infinity;
  for (let t = 0; t < N * R; t++) {
    if (mask[t] === 0) continue;
    tokens += mask[t];
    sum += mask[t] * weights[t];
    high += mask[t] * Number(raw[t] > upper);
    low += mask[t] * Number(raw[t] < lower);
    max = Math.max(max, weights[t]);
    min = Math.min(min, weights[t]);
  }
  if (tokens === 0)
    throw new Error(
      'rollout correction: the response mask has no token (verl: "response_mask must contain at least one valid ' +
        'token")',
    );
  const tokenMean = (s: number) => s / (tokens + 1e-8);
  const metrics: Record<string, number> = { [name('mean')]: tokenMean(sum) };
  if (seqLogs === null) {
    Object.assign(metrics, {
      [name('ratio_fraction_high')]: tokenMean(high),
      [name('ratio_fraction_low')]: tokenMean(low),
      [name('max')]: max,
      [name('min')]: min,
    });
  } else {
    const logs = Array.from(seqLogs);
    Object.assign(metrics, {
      [name('max')]: Math.exp(Math.min(SAFETY_BOUND, Math.max(...logs))),
      [name('min')]: Math.exp(Math.min(...logs)),
      [name('ratio_fraction_high')]: logs.filter((l) => l > Math.log(upper)).length / N,
      [name('ratio_fraction_low')]: logs.filter((l) => l < Math.log(lower)).length / N,
    });
  }
  let clampedSum = 0,
    clampedSquares = 0;
  for (let t = 0; t < N * R; t++) {
    const w = Math.min(upper, Math.max(fromApplied ? 0 : lower, weights[t]));
    clampedSum += mask[t] * w;
    clampedSquares += mask[t] * w * w;
  }
  const clampedMean = tokenMean(clampedSum);
  metrics[name('std')] = tokens > 1 ? Math.sqrt(Math.max(0, tokenMean(clampedSquares) - clampedMean ** 2)) : 0;
  metrics[name('eff_sample_size')] = 1 / (tokenMean(clampedSquares) / (clampedMean + 1e-8) ** 2);
  const rowMeans = (w: Float32Array) =>
    Array.from({ length: N }, (_, b) => {
      let s = 0,
        n = 0;
      for (let t = b * R; t < (b + 1) * R; t++) {
        s += mask[t] * w[t];
        n += mask[t];
      }
      return s / (n + 1e-8);
    });
  const seqMeans = rowMeans(weights);
  const rawSeqMeans = fromApplied ? rowMeans(raw) : seqMeans;
  const seqMean = seqMeans.reduce((a, v) => a + v, 0) / N;
  Object.assign(metrics, {
    [name('seq_mean')]: seqMean,
    [name('seq_std')]: N > 1 ? Math.sqrt(seqMeans.reduce((a, v) => a + (v - seqMean) ** 2, 0) / (N - 1)) : 0,
    [name('seq_max')]: Math.max(...seqMeans),
    [name('seq_min')]: Math.min(...seqMeans),
    [name('seq_max_deviation')]: Math.max(...seqMeans.map((v) => Math.abs(v - 1))),
    [name('seq_fraction_high')]: rawSeqMeans.filter((v) => v > upper).length / N,
    [name('seq_fraction_low')]: rawSeqMeans.filter((v) => v < lower).length / N,
  });
  return metrics;
}

/** verl's compute_rollout_rejection_mask: each criterion's statistic of the clamped log-ratio, per token or per
 *  sequence, keeps or rejects tokens; a token stays only if every criterion keeps it. Returns the new (N, R) mask
 *  and verl's metrics: per option rollout_rs_{option}_* (compute_rs_metrics) and _masked_fraction /
 *  _seq_masked_fraction, then rollout_rs_masked_fraction and rollout_rs_seq_masked_fraction of the combination. */
export function rolloutRejectionMask(
  old: Float32Array,
  rollout: Float32Array,
  mask: Float32Array,
  N: number,
  R: number,
  criteria: readonly RolloutRsCriterion[],
): { mask: Float32Array; metrics: Record<string, number> } {
  if (old.length !== N * R || rollout.length !== N * R || mask.length !== N * R) {
    throw new Error(
      `rolloutRejectionMask: old (${old.length}), rollout (${rollout.length}) and response mask (${mask.length}) ` +
        `must each be N·R = ${N}·${R}`,
    );
  }
  const tokenCounts = Array.from({ length: N }, (_, b) => mask.subarray(b * R, (b + 1) * R).reduce((a, m) => a + m, 0));
  const tokens = tokenCounts.reduce((a, n) => a + n, 0);
  if (tokens === 0)
    throw new Error(
      'rollout correction: the response mask has no token (verl: "response_mask must contain at least one valid ' +
        'token")',
    );
  const valid = tokenCounts.map((n) => n > 0);
  const validCount = valid.filter(Boolean).length;
  const maskedMean = (values: ArrayLike<number>) => {
    let s = 0;
    for (let t = 0; t < N * R; t++) if (mask[t] !== 0) s += mask[t] * values[t];
    return s / (tokens + 1e-8);
  };
  const estimators = { k1: new Float64Array(N * R), k2: new Float64Array(N * R), k3: new Float64Array(N * R) };
  for (let t = 0; t < N * R; t++) {
    const logRatio = Math.min(SAFETY_BOUND, Math.max(-SAFETY_BOUND, old[t] - rollout[t]));
    estimators.k1[t] = -logRatio;
    estimators.k2[t] = 0.5 * logRatio * logRatio;
    estimators.k3[t] = Math.exp(logRatio) - 1 - logRatio;
  }
  const combined = new Float32Array(N * R).fill(1);
  const metrics: Record<string, number> = {};
  for (const { option, upper, lower } of criteria) {
    const name = (key: string) => `rollout_corr/rollout_rs_${option}_${key}`;
    const k1 = option.endsWith('k1');
    const perToken = estimators[option.slice(-2) as 'k1' | 'k2' | 'k3'];
    // Thresholds on the statistic: a k1 option bounds −lr by the logs of its ratio bounds, k2/k3 by `upper`.
    const upperBound = k1 ? Math.log(upper) : upper;
    const lowerBound = k1 ? Math.log(lower!) : 0;
    const kept = (v: number) => v <= upperBound && (!k1 || v >= lowerBound);
    const level = option.startsWith('token_') ? 'token' : 'sequence';
    const perSequence = Array.from({ length: N }, (_, b) => {
      let sum = 0,
        max = -Infinity;
      for (let t = b * R; t < (b + 1) * R; t++) {
        if (mask[t] === 0) continue;
        sum += mask[t] * perToken[t];
        max = Math.max(max, perToken[t]);
      }
      if (option.startsWith('seq_max_')) return valid[b] ? max : 0;
      return option.startsWith('seq_sum_') ? sum : sum / (tokenCounts[b] + 1e-8);
    });
    const statistic =
      level === 'token' ? perToken : Float64Array.from({ length: N * R }, (_, t) => perSequence[Math.floor(t / R)]);
    const keep = Float32Array.from(statistic, (v) => Number(kept(v)));
    let seqRejected = 0;
    for (let b = 0; b < N; b++) {
      for (let t = b * R; t < (b + 1) * R; t++) combined[t] *= keep[t];
      if (valid[b] && keep.subarray(b * R, (b + 1) * R).some((k, i) => k === 0 && mask[b * R + i] !== 0)) seqRejected++;
    }
    Object.assign(
      metrics,
      rsStatisticMetrics(
        name,
        statistic,
        perSequence,
        mask,
        valid,
        tokens,
        maskedMean,
        level,
        upperBound,
        k1 ? lowerBound : null,
      ),
    );
    metrics[name('masked_fraction')] = maskedMean(keep.map((k) => 1 - k));
    metrics[name('seq_masked_fraction')] = validCount > 0 ? seqRejected / validCount : 0;
  }
  metrics['rollout_corr/rollout_rs_masked_fraction'] = maskedMean(combined.map((k) => 1 - k));
  let rowsRejected = 0;
  for (let b = 0; b < N; b++)
    rowsRejected += Number(combined.subarray(b * R, (b + 1) * R).some((k, i) => k <= 0.5 && mask[b * R + i] !== 0));
  metrics['rollout_corr/rollout_rs_seq_masked_fraction'] = rowsRejected / N;
  return { mask: mask.map((m, t) => m * combined[t]), metrics };
}

/** verl's compute_rs_metrics for one option: `statistic` (N·R, a sequence option's value on each of its tokens),
 *  the per-sequence values (a token option's: its masked mean), bounds on the statistic; lowerBound null: none. */
function rsStatisticMetrics(
  name: (key: string) => string,
  statistic: ArrayLike<number>,
  perSequence: number[],
  mask: Float32Array,
  valid: boolean[],
  tokens: number,
  maskedMean: (values: ArrayLike<number>) => number,
  level: 'token' | 'sequence',
  upperBound: number,
  lowerBound: number | null,
): Record<string, number> {
  const R = mask.length / valid.length;
  const seqValues = (
    level === 'sequence'
      ? perSequence
      : perSequence.map((_, b) => {
          let s = 0;
          for (let t = b * R; t < (b + 1) * R; t++) s += mask[t] * statistic[t];
          return s / (mask.subarray(b * R, (b + 1) * R).reduce((a, m) => a + m, 0) + 1e-8);
        })
  ).filter((_, b) => valid[b]);
  const fraction = (values: number[], test: (v: number) => boolean) => values.filter(test).length / values.length;
  const onTokens = Array.from(statistic).filter((_, t) => mask[t] !== 0);
  const metrics: Record<string, number> = { [name('mean')]: maskedMean(statistic) };
  const perSeq = level === 'sequence' && seqValues.length > 0;
  metrics[name('max')] = Math.max(...(perSeq ? seqValues : onTokens));
  metrics[name('min')] = Math.min(...(perSeq ? seqValues : onTokens));
  metrics[name('fraction_high')] = perSeq
    ? fraction(seqValues, (v) => v > upperBound)
    : maskedMean(Array.from(statistic, (v) => Number(v > upperBound)));
  metrics[name('fraction_low')] =
    lowerBound === null
      ? 0
      : perSeq
        ? fraction(seqValues, (v) => v < lowerBound)
        : maskedMean(Array.from(statistic, (v) => Number(v < lowerBound)));
  if (tokens > 1) {
    const clamped = Array.from(statistic, (v) => Math.min(upperBound, Math.max(lowerBound ?? 0, v)));
    const variance = maskedMean(clamped.map((v) => v * v)) - maskedMean(clamped) ** 2;
    metrics[name('std')] = Math.sqrt(Math.max(0, variance));
  } else {
    metrics[name('std')] = 0;
  }
  if (seqValues.length === 0) {
    for (const key of [
      'seq_mean',
      'seq_std',
      'seq_max',
      'seq_min',
      'seq_max_deviation',
      'seq_fraction_high',
      'seq_fraction_low',
    ])
      metrics[name(key)] = 0;
    return metrics;
  }
  const seqMean = seqValues.reduce((a, v) => a + v, 0) / seqValues.length;
  Object.assign(metrics, {
    [name('seq_mean')]: seqMean,
    // torch's std: the unbiased (n − 1) estimate.
    [name('seq_std')]:
      seqValues.length > 1
        ? Math.sqrt(seqValues.reduce((a, v) => a + (v - seqMean) ** 2, 0) / (seqValues.length - 1))
        : 0,
    [name('seq_max')]: Math.max(...seqValues),
    [name('seq_min')]: Math.min(...seqValues),
    [name('seq_max_deviation')]: Math.max(...seqValues.map(Math.abs)),
    [name('seq_fraction_high')]: fraction(seqValues, (v) => v > upperBound),
  });
  if (lowerBound !== null) metrics[name('seq_fraction_low')] = fraction(seqValues, (v) => v < lowerBound);
  return metrics;
}

/** verl's compute_rollout_correction_weights: w = exp(old − rollout) per token, or exp(Σ over the sequence) on every
 *  token of it, log-ratios clamped to ±20, zero off the response mask; then TIS (a number or float string: w clamped
 *  to its upper bound) or IcePop ("lower_upper": w zeroed outside [lower, upper]); metrics of the applied weights
 *  (ratioMetrics), and with batchNormalize the weights divided by their mean (over tokens, or over sequences).
 *  `metricsFromApplied` false is verl b178a3cd's form (TIS only, metrics of the raw weights), kept for its harness.
 *  Returns (N, R) weights and rollout_corr/rollout_is_* metrics. */
export function rolloutIsWeights(
  old: Float32Array,
  rollout: Float32Array,
  mask: Float32Array,
  N: number,
  R: number,
  level: RolloutIsLevel,
  thresholdSpec: number | string,
  batchNormalize: boolean,
  metricsFromApplied = true,
): { weights: Float32Array; metrics: Record<string, number> } {
  // verl b178a3cd took a number only, checked as positive.
  if (!metricsFromApplied && !(typeof thresholdSpec === 'number' && thresholdSpec > 0))
    throw new Error(`algorithm.rollout_correction.rollout_is_threshold must be positive, got ${thresholdSpec}`);
  const threshold = parseRolloutIsThreshold(thresholdSpec);
  const clamp = (x: number) => Math.min(SAFETY_BOUND, Math.max(-SAFETY_BOUND, x));
  const raw = new Float32Array(N * R);
  const logRatioSums = new Float64Array(N);
  for (let b = 0; b < N; b++) {
    for (let t = b * R; t < (b + 1) * R; t++) logRatioSums[b] += mask[t] * (old[t] - rollout[t]);
    for (let t = b * R; t < (b + 1) * R; t++) {
      raw[t] = mask[t] * Math.exp(clamp(level === 'token' ? old[t] - rollout[t] : logRatioSums[b]));
    }
  }
  const { upper, lower } = threshold;
  const weights = raw.map((w) => (lower === null ? Math.min(w, upper) : w >= lower && w <= upper ? w : 0));
  const metrics = ratioMetrics(
    'rollout_is',
    weights,
    raw,
    mask,
    N,
    R,
    level === 'token' ? null : logRatioSums,
    upper,
    lower ?? 1 / upper,
    metricsFromApplied,
  );
  if (lower !== null) {
    let outside = 0,
      tokens = 0;
    for (let t = 0; t < N * R; t++) {
      outside += mask[t] * Number(raw[t] < lower || raw[t] > upper);
      tokens += mask[t];
    }
    metrics['rollout_corr/rollout_is_oob_ratio'] = outside / (tokens + 1e-8);
  }
  if (batchNormalize) {
    let mean: number;
    if (level === 'token') {
      let s = 0,
        tokens = 0;
      for (let t = 0; t < N * R; t++) {
        s += mask[t] * weights[t];
        tokens += mask[t];
      }
      mean = s / (tokens + 1e-8);
    } else {
      let s = 0,
        rows = 0;
      for (let b = 0; b < N; b++) {
        let ws = 0,
          n = 0;
        for (let t = b * R; t < (b + 1) * R; t++) {
          ws += mask[t] * weights[t];
          n += mask[t];
        }
        if (n > 0) {
          s += ws / (n + 1e-8);
          rows++;
        }
      }
      mean = s / Math.max(rows, 1e-8);
    }
    if (mean > 1e-8) for (let t = 0; t < N * R; t++) weights[t] /= mean;
    metrics['rollout_corr/rollout_is_batch_norm_factor'] = mean > 1e-8 ? mean : 1;
  }
  return { weights, metrics };
}
