// PF-PPO, verl's algorithm.use_pf_ppo (core_algos.compute_pf_ppo_reweight_data, which ray_trainer.compute_advantage
// calls for GAE only, once the advantages and returns are in the batch): the batch is resampled with replacement,
// as many rows as it holds, each sequence drawn in proportion to a weight of its score (token_level_scores summed:
// the reward before any KL penalty). The weights are verl's; the draws come from the run's seeded generator, since
// torch.multinomial's cannot be reproduced outside torch, so the rows drawn differ from verl's in a run while
// following the same distribution.
import type { Rng } from '../../engine/rng.ts';
import { PF_PPO_REWEIGHT_METHODS, type PfPpoReweightMethod } from '../config/schema.ts';

/** algorithm.pf_ppo's settings. */
export interface PfPpoPlan {
  reweightMethod: PfPpoReweightMethod;
  weightPow: number;
}

/** verl's floor under every weight (added, then clamped to): each sequence keeps a chance to be drawn. */
const WEIGHT_FLOOR = 1e-8;

/**
 * verl's compute_weights and its clamp(weights + 1e-8, min=1e-8), per sequence score: pow |score|^weightPow;
 * max_min 1 where the score is the batch's highest or lowest, else 0; max_random 0.4 at the highest, else 0.1.
 * Computed in float64, where verl computes in the batch's dtype (float32 in a run): the weights agree to float32
 * rounding. Throws verl's message for an unknown method, and on a weight that is not finite (|0| to a negative
 * power), which torch.multinomial refuses too.
 */
export function pfPpoWeights(scores: readonly number[], reweightMethod: string, weightPow: number): Float64Array {
  const max = scores.reduce((a, s) => Math.max(a, s), -Infinity);
  const min = scores.reduce((a, s) => Math.min(a, s), Infinity);
  const weightOf: Record<PfPpoReweightMethod, (score: number) => number> = {
    pow: (s) => Math.abs(s) ** weightPow,
    max_min: (s) => (s === max || s === min ? 1 : 0),
    max_random: (s) => (s === max ? 0.4 : 0.1),
  };
  if (!(PF_PPO_REWEIGHT_METHODS as readonly string[]).includes(reweightMethod))
    throw new Error(`Unsupported reweight_method: ${reweightMethod}`);
  const weight = weightOf[reweightMethod as PfPpoReweightMethod];
  return Float64Array.from(scores, (score, i) => {
    const w = Math.max(weight(score) + WEIGHT_FLOOR, WEIGHT_FLOOR);
    if (!Number.isFinite(w))
      throw new Error(
        `algorithm.pf_ppo.weight_pow=${weightPow}: sequence ${i}'s weight |${score}|^${weightPow} is ${w}; a weight ` +
          `must be finite (torch.multinomial refuses it too)`,
      );
    return w;
  });
}

/** `count` indices drawn with replacement, index i with probability weights[i] / Σ weights (positive weights):
 *  one uniform draw each, inverted through the cumulative weights. */
export function drawWithReplacement(weights: Float64Array, count: number, rng: Rng): number[] {
  const cumulative = new Float64Array(weights.length);
  weights.reduce((sum, w, i) => (cumulative[i] = sum + w), 0);
  const total = cumulative[weights.length - 1];
  return Array.from({ length: count }, () => {
    const u = rng.next() * total;
    let lo = 0;
    let hi = weights.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid] > u) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  });
}

/** The rows PF-PPO trains on, N drawn from the N sequences of `scores`, and pf_ppo/distinct_rows: how many different
 *  sequences they are (N when every row is kept once; verl logs nothing for PF-PPO). */
export function pfPpoSample(
  scores: readonly number[],
  plan: PfPpoPlan,
  rng: Rng,
): { indices: number[]; metrics: Record<string, number> } {
  const indices = drawWithReplacement(pfPpoWeights(scores, plan.reweightMethod, plan.weightPow), scores.length, rng);
  return { indices, metrics: { 'pf_ppo/distinct_rows': new Set(indices).size } };
}
