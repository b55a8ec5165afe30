import source from './distillation-loss.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize } from '../../engine/index.ts';
import {
  aggregationUniforms,
  expectRows,
  withKlEstimators,
  withVanillaPolicyTerm,
  withWorkgroupReduce,
} from './ppo-shared.ts';
import { parseKlEstimator, type LossAggregation } from './ppo-vocabulary.ts';

export const distillationLossSpec: KernelSpec = {
  name: 'distillation-loss',
  source: withWorkgroupReduce(withKlEstimators(withVanillaPolicyTerm(source))),
  bindings: [
    { name: 'logProb', access: 'read' },
    { name: 'oldLogProb', access: 'read' },
    { name: 'teacher', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'isWeights', access: 'read' },
    { name: 'grads', access: 'read_write', type: 'vec2<f32>' },
    { name: 'rowPartials', access: 'read_write' },
    { name: 'lossGrad', access: 'read_write' },
  ],
  uniforms: [
    { name: 'T', type: 'u32' },
    { name: 'precomputed', type: 'u32' },
    { name: 'klCode', type: 'u32' },
    { name: 'klStraightThrough', type: 'u32' },
    { name: 'maxClamp', type: 'f32' },
    { name: 'usePolicyGradient', type: 'u32' },
    { name: 'clipRatioLow', type: 'f32' },
    { name: 'clipRatioHigh', type: 'f32' },
    { name: 'clipRatioC', type: 'f32' },
    { name: 'useIsWeights', type: 'u32' },
    { name: 'aggMode', type: 'u32' },
    { name: 'aggScale', type: 'f32' },
    { name: 'coef', type: 'f32' },
    { name: 'accumulate', type: 'u32' },
  ],
};

/** Layout of each row of the distillation loss's partials [B, 8] (distillation-loss.wgsl). */
export const DISTILLATION_PARTIALS = [
  'loss',
  'abs_loss_sum',
  'token_count',
  'pg_clipped',
  'ppo_kl_sum',
  'pg_clipped_lower',
  'loss_min',
  'loss_max',
] as const;

export interface DistillationLossTensors {
  /** [B, T] the student's log-probs of the sampled tokens (the gradient is taken against them). */
  logProb: Tensor;
  /** [B, T] old log-probs: the policy-gradient path's ratio. */
  oldLogProb: Tensor;
  /** [B, T] the teacher's log-probs of the sampled tokens, or with `precomputed` each token's loss itself. */
  teacher: Tensor;
  responseMask: Tensor;
  /** [B, T] rollout correction's importance weights on the policy-gradient path; null: none. */
  isWeights: Tensor | null;
  /** [B, T, 2] (d loss / d logProb, d loss / d entropy): the actor loss's, which this adds to (accumulate). */
  grads: Tensor;
  /** Output [B, 8], see DISTILLATION_PARTIALS. */
  rowPartials: Tensor;
  /** Output [B, T]: the back-propagated path's gradient per token; precomputed, coef × d loss / d (the token's
   *  loss), which scales forward_kl_topk's logits gradient (forward-kl-topk.ts). */
  lossGrad: Tensor;
}

/** The distillation loss's settings a dispatch needs (verl's DistillationLossConfig, resolved). */
export interface DistillationLossArgs {
  /** A kl_penalty estimator name (k1 … k3, kl, abs, mse, low_var_kl), or 'precomputed' (`teacher` holds each
   *  token's loss; back-propagated, its gradient leaves through lossGrad only). */
  lossMode: string;
  usePolicyGradient: boolean;
  /** null: no clamp. */
  lossMaxClamp: number | null;
  clipRatioLow: number;
  clipRatioHigh: number;
  /** Scales the gradient: distillation_loss_coef with use_task_rewards, else 1. */
  coef: number;
  /** Add to `grads` (the actor loss is in them) instead of writing them. */
  accumulate: boolean;
  aggregation: LossAggregation;
  B: number;
  T: number;
}

/** On-policy distillation's loss of one micro-batch, into the actor's gradients (see distillation-loss.wgsl). */
export function computeDistillationLossGpu(engine: Engine, t: DistillationLossTensors, args: DistillationLossArgs) {
  const { B, T } = args;
  expectRows('distillation-loss', B, T);
  const tokens: [Tensor | null, string][] = [
    [t.logProb, 'logProb'],
    [t.oldLogProb, 'oldLogProb'],
    [t.teacher, 'teacher'],
    [t.responseMask, 'responseMask'],
    [t.isWeights, 'isWeights'],
  ];
  for (const [tensor, what] of tokens)
    if (tensor) expectSize('distillation-loss', what, tensor, B * T, `[B=${B}, T=${T}]`);
  expectSize('distillation-loss', 'grads', t.grads, 2 * B * T, `[B=${B}, T=${T}, 2]`);
  expectSize('distillation-loss', 'rowPartials', t.rowPartials, 8 * B, `[B=${B}, 8]`);
  expectSize('distillation-loss', 'lossGrad', t.lossGrad, B * T, `[B=${B}, T=${T}]`);
  const precomputed = args.lossMode === 'precomputed';
  const kl = precomputed ? { code: 0, straightThrough: false } : parseKlEstimator(args.lossMode);
  const agg = aggregationUniforms(args.aggregation);
  engine.dispatch(distillationLossSpec, {
    bindings: {
      logProb: t.logProb,
      oldLogProb: t.oldLogProb,
      teacher: t.teacher,
      mask: t.responseMask,
      isWeights: t.isWeights ?? t.responseMask,
      grads: t.grads,
      rowPartials: t.rowPartials,
      lossGrad: t.lossGrad,
    },
    uniforms: {
      T,
      precomputed: precomputed ? 1 : 0,
      klCode: kl.code,
      klStraightThrough: kl.straightThrough ? 1 : 0,
      maxClamp: args.lossMaxClamp ?? 3.4e38,
      usePolicyGradient: args.usePolicyGradient ? 1 : 0,
      clipRatioLow: args.clipRatioLow,
      clipRatioHigh: args.clipRatioHigh,
      // verl's DistillationLossConfig has no clip_ratio_c, so compute_policy_loss_vanilla takes its default, 3.0.
      clipRatioC: 3.0,
      useIsWeights: t.isWeights ? 1 : 0,
      aggMode: agg.mode,
      aggScale: agg.scale,
      coef: args.coef,
      accumulate: args.accumulate ? 1 : 0,
    },
    workgroups: [B],
  });
}

/** The micro-batch's distillation metrics from its partials [B, 8] on the host: the aggregated loss, and the sums,
 *  counts and extremes the update's metrics are made from. */
export function distillationPartialTotals(partials: Float32Array, B: number): Record<string, number> {
  const totals: Record<string, number> = { loss_min: Infinity, loss_max: -Infinity };
  for (let b = 0; b < B; b++) {
    const row = partials.subarray(8 * b, 8 * b + 8);
    DISTILLATION_PARTIALS.forEach((name, k) => {
      if (name === 'loss_min') {
        if (row[2] > 0) totals.loss_min = Math.min(totals.loss_min, row[k]);
      } else if (name === 'loss_max') {
        if (row[2] > 0) totals.loss_max = Math.max(totals.loss_max, row[k]);
      } else totals[name] = (totals[name] ?? 0) + row[k];
    });
  }
  return totals;
}
