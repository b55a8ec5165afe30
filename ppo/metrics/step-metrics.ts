// The per-step metrics under verl's names (critic/score, critic/rewards, critic/advantages, critic/returns,
// critic/values, critic/vf_explained_var, response_length, response_length_non_aborted, response/aborted_ratio,
// prompt_length, actor/*, critic/*, timing_s/*, perf/*), and throughput and MFU computed in one place. The data
// metrics follow verl's compute_data_metrics (verl/trainer/ppo/metric_utils.py): a clip ratio is the share of rows
// exactly as long as the padded width, which verl pads to data.max_prompt_length and data.max_response_length.
import type { DecoderConfig } from '../../models/hf-config.ts';
import { qkvWidth } from '../../models/parameter-layout.ts';
import type { Experience } from '../phases/experience.ts';

function maskedStats(values: Float32Array, mask: Float32Array): { mean: number; max: number; min: number } {
  let sum = 0;
  let count = 0;
  let max = -Infinity;
  let min = Infinity;
  for (let i = 0; i < values.length; i++) {
    if (!mask[i]) continue;
    sum += values[i];
    count++;
    max = Math.max(max, values[i]);
    min = Math.min(min, values[i]);
  }
  return count ? { mean: sum / count, max, min } : { mean: 0, max: 0, min: 0 };
}

function listStats(values: readonly number[]): { mean: number; max: number; min: number } {
  if (values.length === 0) return { mean: 0, max: 0, min: 0 };
  return {
    mean: values.reduce((a, b) => a + b, 0) / values.length,
    max: Math.max(...values),
    min: Math.min(...values),
  };
}

/** Unbiased variance, as torch.var. */
function variance(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return values.reduce((a, v) => a + (v - mean) ** 2, 0) / (values.length - 1);
}

/** verl's critic/vf_explained_var over response tokens: 1 − Var(returns − values) / (Var(returns) + 1e-5). */
function explainedVariance(returns: Float32Array, values: Float32Array, mask: Float32Array): number {
  const valid = [...mask.keys()].filter((i) => mask[i]);
  return 1 - variance(valid.map((i) => returns[i] - values[i])) / (variance(valid.map((i) => returns[i])) + 1e-5);
}

/** Matmul FLOPs of one token through the forward pass (2 × weights), plus causal attention at context `T`. */
export function forwardFlopsPerToken(c: DecoderConfig, T: number): number {
  const perLayer =
    c.hiddenSize * qkvWidth(c) + c.numHeads * c.headDim * c.hiddenSize + 3 * c.intermediateSize * c.hiddenSize;
  const weights = c.numLayers * perLayer + c.vocabSize * c.hiddenSize;
  const attention = c.numLayers * 2 * 2 * c.numHeads * c.headDim * (T / 2);
  return 2 * weights + attention;
}

export function stepMetrics(a: {
  step: number;
  /** Its host copies: the metrics read nothing from the device. */
  experience: Omit<Experience, 'tensors'>;
  updateMetrics: Record<string, number>;
  timing: Record<string, number>;
  actorConfig: DecoderConfig;
  criticConfig: DecoderConfig | null;
  /** The device's peak FP32 FLOP/s (engine/peak-flops.ts); null: unknown, so no MFU. */
  peakFlops: number | null;
  /** data.max_prompt_length: verl's prompt width, which our rollout pads only to the batch's longest prompt. */
  maxPromptLength: number;
}): Record<string, number> {
  const x = a.experience;
  // verl leaves aborted samples (no response token) out of the score and reward statistics.
  const nonAborted = [...x.rollout.responseLengths.keys()].filter((i) => x.rollout.responseLengths[i] > 0);
  const score = listStats(nonAborted.map((i) => x.scores[i]));
  const rowRewards = nonAborted.map((b) =>
    x.tokenLevelRewards.subarray(b * x.R, (b + 1) * x.R).reduce((s, v) => s + v, 0),
  );
  const rewards = listStats(rowRewards);
  const advantages = maskedStats(x.advantages, x.responseMask);
  const returns = maskedStats(x.returns, x.responseMask);
  const clipRatio = (lengths: readonly number[], width: number) =>
    lengths.length ? lengths.filter((l) => l === width).length / lengths.length : 0;
  const lengths = listStats(x.rollout.responseLengths);
  const nonAbortedLengths = nonAborted.map((i) => x.rollout.responseLengths[i]);
  const nonAbortedStats = listStats(nonAbortedLengths);
  const promptRows = x.rollout.attentionMask.map((row) => row.slice(0, x.S - x.R).reduce((s, v) => s + v, 0));
  const promptLengths = listStats(promptRows);
  const metrics: Record<string, number> = {
    'training/global_step': a.step,
    'critic/score/mean': score.mean,
    'critic/score/max': score.max,
    'critic/score/min': score.min,
    'critic/rewards/mean': rewards.mean,
    'critic/rewards/max': rewards.max,
    'critic/rewards/min': rewards.min,
    'critic/advantages/mean': advantages.mean,
    'critic/advantages/max': advantages.max,
    'critic/advantages/min': advantages.min,
    'critic/returns/mean': returns.mean,
    'critic/returns/max': returns.max,
    'critic/returns/min': returns.min,
    'response_length/mean': lengths.mean,
    'response_length/max': lengths.max,
    'response_length/min': lengths.min,
    'response_length/clip_ratio': clipRatio(x.rollout.responseLengths, x.R),
    'response_length_non_aborted/mean': nonAbortedStats.mean,
    'response_length_non_aborted/max': nonAbortedStats.max,
    'response_length_non_aborted/min': nonAbortedStats.min,
    'response_length_non_aborted/clip_ratio': clipRatio(nonAbortedLengths, x.R),
    'response/aborted_ratio': (x.N - nonAborted.length) / x.N,
    'prompt_length/mean': promptLengths.mean,
    'prompt_length/max': promptLengths.max,
    'prompt_length/min': promptLengths.min,
    'prompt_length/clip_ratio': clipRatio(promptRows, a.maxPromptLength),
    ...x.metrics,
    ...a.updateMetrics,
    ...a.timing,
  };
  // A pass/fail check (exact match, a verifier): its mean is an accuracy, which the console calls so.
  if (x.scores.every((v) => v === 0 || v === 1)) metrics['critic/score/accuracy'] = score.mean;
  if (x.values) {
    const values = maskedStats(x.values, x.responseMask);
    Object.assign(metrics, {
      'critic/values/mean': values.mean,
      'critic/values/max': values.max,
      'critic/values/min': values.min,
    });
    metrics['critic/vf_explained_var'] = explainedVariance(x.returns, x.values, x.responseMask);
  }
  // Tokens through the models this step: the rollout's, then each training pass over the full sequences.
  const tokens = x.rollout.attentionMask.reduce((s, row) => s + row.reduce((t, v) => t + v, 0), 0);
  const stepSeconds = a.timing['timing_s/step'] ?? 0;
  if (stepSeconds > 0) {
    metrics['perf/total_num_tokens'] = tokens;
    metrics['perf/throughput'] = tokens / stepSeconds;
    const flops =
      3 * forwardFlopsPerToken(a.actorConfig, x.S) * tokens +
      (a.criticConfig ? 3 * forwardFlopsPerToken(a.criticConfig, x.S) * tokens : 0);
    if (a.peakFlops !== null) metrics['perf/mfu'] = flops / stepSeconds / a.peakFlops;
  }
  return metrics;
}

/** Host↔device traffic counted by the engine (Engine.transfers). */
export interface TransferCounts {
  readbacks: number;
  readbackBytes: number;
  uploads: number;
  uploadBytes: number;
}

/** The step's traffic between two snapshots of the engine's counters: perf/readbacks (pipeline drains: tokens to
 *  decode, rewards, the step's metrics) and perf/upload_bytes (what the host sent), both constant in the number of
 *  micro-batches but for the token rows each micro-batch uploads. */
export function transferMetrics(before: TransferCounts, after: TransferCounts): Record<string, number> {
  return {
    'perf/readbacks': after.readbacks - before.readbacks,
    'perf/readback_bytes': after.readbackBytes - before.readbackBytes,
    'perf/uploads': after.uploads - before.uploads,
    'perf/upload_bytes': after.uploadBytes - before.uploadBytes,
  };
}
