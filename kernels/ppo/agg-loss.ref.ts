// CPU reference (float64) for kernels/ppo/agg-loss: verl's agg_loss as a weighted sum Σ w[b,t]·loss[b,t], where the
// weight w = d loss / d loss_mat is also the gradient. The global denominators are explicit so that a
// mini-batch split into micro-batches sums to exactly the unsplit loss (verl's batch_num_tokens /
// global_batch_size / loss_scale_factor / dp_size).
import { checkLossAggMode, type LossAggregation } from './ppo-vocabulary.ts';

/** verl's defaults when the caller passes none: local token count, local non-empty rows, response length. */
export function localAggregation(mode: string, mask: ArrayLike<number>, B: number, T: number): LossAggregation {
  let tokens = 0;
  let rows = 0;
  for (let b = 0; b < B; b++) {
    let count = 0;
    for (let t = 0; t < T; t++) count += mask[b * T + t];
    tokens += count;
    if (count > 0) rows++;
  }
  return { mode: checkLossAggMode(mode), batchNumTokens: tokens, globalBatchSize: rows, lossScaleFactor: T, dpSize: 1 };
}

/** Weight of token (b, t) once its row holds `rowCount` valid tokens; zero where masked. */
export function aggWeight(agg: LossAggregation, mask: number, rowCount: number): number {
  if (mask === 0) return 0;
  switch (agg.mode) {
    case 'token-mean':
      return (mask * agg.dpSize) / agg.batchNumTokens;
    case 'seq-mean-token-sum':
      return (mask * agg.dpSize) / agg.globalBatchSize;
    case 'seq-mean-token-mean':
      return (mask / (rowCount + 1e-8)) * (agg.dpSize / agg.globalBatchSize);
    case 'seq-mean-token-sum-norm':
      return (mask * agg.dpSize) / agg.globalBatchSize / agg.lossScaleFactor;
    case 'token-sum':
      return mask * agg.dpSize;
  }
}

export function aggWeightsRef(mask: ArrayLike<number>, B: number, T: number, agg: LossAggregation): Float64Array {
  const w = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let count = 0;
    for (let t = 0; t < T; t++) count += mask[b * T + t];
    for (let t = 0; t < T; t++) w[b * T + t] = aggWeight(agg, mask[b * T + t], count);
  }
  return w;
}

export function aggLossRef(
  lossMat: ArrayLike<number>,
  mask: ArrayLike<number>,
  B: number,
  T: number,
  agg: LossAggregation,
): { loss: number; grad: Float64Array } {
  const grad = aggWeightsRef(mask, B, T, agg);
  let loss = 0;
  for (let i = 0; i < B * T; i++) if (grad[i] !== 0) loss += grad[i] * lossMat[i];
  return { loss, grad };
}
