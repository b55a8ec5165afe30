// CPU reference (float64) for on-policy distillation's per-token losses and their combination (verl 1dda039b,
// verl/trainer/distillation/losses.py and fsdp/losses.py), for the kernels that will run them:
//   estimator modes: kl_penalty(student log-prob, teacher log-prob, mode) of the sampled token (kl-penalty.ref.ts);
//   forward_kl_topk: KL = Σ_k e^{t_k}·(t_k − s_k) over the teacher's top-k ids, s = log_softmax(student logits)
//     gathered there, both clamped below at log_prob_min_clamp, then clamped at 0 (top-k masses do not sum to 1);
//     d KL / d z_j = Σ_k c_k·(softmax_j − [j = id_k]) with c_k = e^{t_k}·[s_k ≥ min clamp], 0 where KL < 0;
//   combination: losses clamped to ±loss_max_clamp; with use_policy_gradient, vanilla PPO with advantages
//     −losses (detached) and the distillation clip ratios, else agg_loss(losses); the total is
//     (use_task_rewards ? ppo_loss : 0) + distill·(use_task_rewards ? distillation_loss_coef : 1).
import { aggLossRef } from './agg-loss.ref.ts';
import { klPenaltyRef } from './kl-penalty.ref.ts';
import { computeActorLossRef } from './policy-loss.ref.ts';
import type { LossAggregation } from './ppo-vocabulary.ts';

export interface TopkKlToken {
  loss: number;
  /** d loss / d logits [V]. */
  gradLogits: Float64Array;
  studentMass: number;
  teacherMass: number;
  /** Teacher ids among the student's own top-k. */
  overlapCount: number;
  /** −Σ e^{t_k}(t_k − s_k) over the overlapping ids / their count (0 without overlap). */
  overlapTokenAdvantage: number;
}

/** verl's compute_forward_kl_topk at one position: student logits [V], the teacher's top-k log-probs and ids. */
export function forwardKlTopkRef(
  logits: ArrayLike<number>,
  teacherLogProbs: ArrayLike<number>,
  teacherIds: ArrayLike<number>,
  logProbMinClamp: number | null = -10,
): TopkKlToken {
  const V = logits.length;
  const K = teacherIds.length;
  let max = -Infinity;
  for (let j = 0; j < V; j++) max = Math.max(max, logits[j]);
  let sum = 0;
  for (let j = 0; j < V; j++) sum += Math.exp(logits[j] - max);
  const lse = max + Math.log(sum);
  const softmax = Float64Array.from({ length: V }, (_, j) => Math.exp(logits[j] - lse));
  const floor = logProbMinClamp ?? -Infinity;
  // The student's own top-k ids (torch.topk; ties are not exercised).
  const studentTop = new Set(
    Array.from({ length: V }, (_, j) => j)
      .sort((a, b) => logits[b] - logits[a])
      .slice(0, K),
  );
  let kl = 0,
    studentMass = 0,
    teacherMass = 0,
    overlapCount = 0,
    overlapSum = 0;
  const coefficients = new Float64Array(K);
  for (let k = 0; k < K; k++) {
    const rawS = logits[teacherIds[k]] - lse;
    studentMass += Math.exp(rawS);
    teacherMass += Math.exp(teacherLogProbs[k]);
    const s = Math.max(rawS, floor);
    const t = Math.max(teacherLogProbs[k], floor);
    const term = Math.exp(t) * (t - s);
    kl += term;
    coefficients[k] = rawS >= floor ? Math.exp(t) : 0;
    if (studentTop.has(teacherIds[k])) {
      overlapCount++;
      overlapSum -= term;
    }
  }
  const gradLogits = new Float64Array(V);
  if (kl >= 0) {
    let total = 0;
    for (let k = 0; k < K; k++) {
      total += coefficients[k];
      gradLogits[teacherIds[k]] -= coefficients[k];
    }
    for (let j = 0; j < V; j++) gradLogits[j] += total * softmax[j];
  }
  return {
    loss: Math.max(kl, 0),
    gradLogits,
    studentMass,
    teacherMass,
    overlapCount,
    overlapTokenAdvantage: overlapCount > 0 ? overlapSum / overlapCount : 0,
  };
}

/** verl's compute_distillation_loss_reverse_kl_estimator: kl_penalty(student, teacher, mode) per token. */
export function estimatorDistillationRef(
  studentLogProbs: ArrayLike<number>,
  teacherLogProbs: ArrayLike<number>,
  mode: string,
): { losses: Float64Array; grad: Float64Array } {
  const { kl, grad } = klPenaltyRef(studentLogProbs, teacherLogProbs, mode);
  return { losses: kl, grad };
}

/** verl's distillation_loss: per-token losses [B, T] (their gradient d loss_t / d log π_t, for the direct path)
 *  clamped and aggregated, directly or through vanilla PPO with advantages −losses. Returns the scalar and
 *  d / d log π. */
export function combineDistillationRef(args: {
  losses: ArrayLike<number>;
  /** d losses[t] / d log π[t] (estimator modes); the direct path's gradient. */
  lossGrad: ArrayLike<number>;
  logProb: ArrayLike<number>;
  oldLogProb: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  aggregation: LossAggregation;
  usePolicyGradient: boolean;
  lossMaxClamp: number | null;
  clipRatioLow: number;
  clipRatioHigh: number;
  /** verl's rollout_is_weights on the policy-gradient path's vanilla loss. */
  isWeights?: ArrayLike<number>;
  B: number;
  T: number;
}): { loss: number; gradLogProb: Float64Array } {
  const { B, T } = args;
  const bound = args.lossMaxClamp ?? Infinity;
  const clamped = Float64Array.from(args.losses, (l) => Math.min(Math.max(l, -bound), bound));
  if (args.usePolicyGradient) {
    const r = computeActorLossRef({
      oldLogProb: args.oldLogProb,
      logProb: args.logProb,
      advantages: clamped.map((l) => -l),
      responseMask: args.responseMask,
      isWeights: args.isWeights,
      B,
      T,
      // DistillationLossConfig has no clip_ratio_c: ActorConfig's default, 3.0.
      config: {
        lossMode: 'vanilla',
        clipRatioLow: args.clipRatioLow,
        clipRatioHigh: args.clipRatioHigh,
        clipRatioC: 3.0,
      },
      aggregation: args.aggregation,
    });
    return { loss: r.pgLoss, gradLogProb: r.gradLogProb };
  }
  const { loss, grad } = aggLossRef(clamped, args.responseMask, B, T, args.aggregation);
  // The clamp passes gradient on its closed interval.
  const gradLogProb = Float64Array.from(grad, (g, i) => (Math.abs(args.losses[i]) <= bound ? g * args.lossGrad[i] : 0));
  return { loss, gradLogProb };
}

/** verl's distillation_ppo_loss: the task's PPO loss and the distillation loss combined. */
export function totalDistillationLoss(
  ppoLoss: number,
  distillationLoss: number,
  settings: { useTaskRewards: boolean; distillationLossCoef: number },
): number {
  return (
    (settings.useTaskRewards ? ppoLoss : 0) +
    distillationLoss * (settings.useTaskRewards ? settings.distillationLossCoef : 1)
  );
}
