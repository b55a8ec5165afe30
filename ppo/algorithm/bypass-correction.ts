// Rollout correction's bypass mode (verl's compute_policy_loss_bypass_mode): the old log-probs are the rollout's
// own, and each micro-batch's policy loss weighs and rejects its tokens against the *current* policy — the
// importance weights and rejection criteria of rollout-correction.ts with the training forward's log-probs in place
// of recomputed old ones, so they follow the policy as the update moves it. Host arithmetic on the micro-batch's
// log-probs, read back once per micro-batch (the pick must precede the loss), and on host copies of the rest.
import {
  rolloutIsWeights,
  rolloutMismatchMetrics,
  rolloutRejectionMask,
  type RolloutIsLevel,
} from './rollout-correction.ts';
import type { RolloutRsCriterion } from '../config/rollout-rs-spec.ts';
import type { PolicyLossMode } from '../../kernels/ppo/ppo-vocabulary.ts';

export type BypassLossType = 'ppo_clip' | 'reinforce';

export interface BypassCorrectionPlan {
  lossType: BypassLossType;
  rolloutIs: {
    level: RolloutIsLevel;
    /** TIS's upper bound, or IcePop's "lower_upper". */
    threshold: number | string;
    batchNormalize: boolean;
    /** false: verl b178a3cd's metrics of the raw weights (only the verl-case harness sets it). */
    metricsFromAppliedWeights?: boolean;
  } | null;
  rolloutRs: RolloutRsCriterion[] | null;
}

/** The policy loss each loss_type runs, whatever actor.policy_loss.loss_mode says (verl switches loss_mode to
 *  bypass_mode). ppo_clip is vanilla with ratio π_θ/π_rollout; reinforce is verl's −w·A·log π_θ: gpg's −A·log π_θ
 *  times the (detached) importance weights, which the policy loss multiplies in as it does rollout_is's. */
export const BYPASS_LOSS_MODES: Record<BypassLossType, PolicyLossMode> = { ppo_clip: 'vanilla', reinforce: 'gpg' };

export interface BypassCorrection {
  /** rollout_is's truncated (and normalized) weights, zero off the mask; null without rollout_is. */
  weights: Float32Array | null;
  /** The 0/1 tokens rejection sampling keeps (the policy term's mask); null without rollout_rs. */
  policyMask: Float32Array | null;
  /** The weights the policy loss multiplies each token's term by (the policy-loss kernel's isWeights): reinforce's
   *  with rollout_is; null for ppo_clip, which only measures them, as its ratio already is π_θ/π_rollout. */
  lossWeights: Float32Array | null;
  /** rollout_corr/*: the weights' and rejection's statistics and the current-vs-rollout mismatch, verl's names. */
  metrics: Record<string, number>;
}

/** One micro-batch of N rows × R response columns: current and rollout log-probs, response mask. */
export function bypassCorrection(
  plan: BypassCorrectionPlan,
  current: Float32Array,
  rollout: Float32Array,
  mask: Float32Array,
  N: number,
  R: number,
): BypassCorrection {
  const metrics: Record<string, number> = {};
  let weights: Float32Array | null = null;
  if (plan.rolloutIs) {
    const { level, threshold, batchNormalize, metricsFromAppliedWeights } = plan.rolloutIs;
    const is = rolloutIsWeights(
      current,
      rollout,
      mask,
      N,
      R,
      level,
      threshold,
      batchNormalize,
      metricsFromAppliedWeights,
    );
    Object.assign(metrics, is.metrics);
    weights = is.weights;
  }
  let policyMask: Float32Array | null = null;
  if (plan.rolloutRs) {
    const rs = rolloutRejectionMask(current, rollout, mask, N, R, plan.rolloutRs);
    Object.assign(metrics, rs.metrics);
    policyMask = rs.mask;
  }
  Object.assign(metrics, rolloutMismatchMetrics(current, rollout, mask, N, R));
  return { weights, policyMask, lossWeights: plan.lossType === 'reinforce' ? weights : null, metrics };
}
