import source from './policy-loss.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize } from '../../engine/index.ts';
import { aggregationUniforms, expectRows, withKlEstimators, withWorkgroupReduce } from './ppo-shared.ts';
import { reduceLossPartials } from './loss-partials.ts';
import { parseKlEstimator, type LossAggregation, type PolicyLossConfig } from './ppo-vocabulary.ts';
import { lossModeSpec, policyLossModeConstants } from './policy-loss-modes.ts';

export const policyLossSpec: KernelSpec = {
  name: 'policy-loss',
  source: withWorkgroupReduce(withKlEstimators(`${policyLossModeConstants()}\n${source}`)),
  bindings: [
    { name: 'oldLogProb', access: 'read' },
    { name: 'logProb', access: 'read' },
    { name: 'advantages', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'refLogProb', access: 'read' },
    { name: 'entropy', access: 'read' },
    { name: 'tokenFlags', access: 'read' },
    { name: 'isWeights', access: 'read' },
    { name: 'grads', access: 'read_write', type: 'vec2<f32>' },
    { name: 'rowPartials', access: 'read_write' },
  ],
  uniforms: [
    { name: 'T', type: 'u32' },
    { name: 'lossMode', type: 'u32' },
    { name: 'clipRatioLow', type: 'f32' },
    { name: 'clipRatioHigh', type: 'f32' },
    { name: 'clipRatioC', type: 'f32' },
    { name: 'aggMode', type: 'u32' },
    { name: 'aggScale', type: 'f32' },
    { name: 'pgAggMode', type: 'u32' },
    { name: 'pgAggScale', type: 'f32' },
    { name: 'useEntropy', type: 'u32' },
    { name: 'entropyCoeff', type: 'f32' },
    { name: 'useKl', type: 'u32' },
    { name: 'klCode', type: 'u32' },
    { name: 'klStraightThrough', type: 'u32' },
    { name: 'klCoef', type: 'f32' },
    { name: 'tauPos', type: 'f32' },
    { name: 'tauNeg', type: 'f32' },
    { name: 'ppoKlCoef', type: 'f32' },
    { name: 'geoRows', type: 'f32' },
    { name: 'policyMasked', type: 'u32' },
    { name: 'useIsWeights', type: 'u32' },
    { name: 'droBeta', type: 'f32' },
  ],
};

/** Layout of the actor-loss output [8] (and of each row of the partials); token_count counts the policy term's tokens,
 *  the denominator of pg_clipfrac, ppo_kl and pg_clipfrac_lower. */
export const ACTOR_LOSS_OUTPUTS = [
  'pg_loss',
  'pg_clipfrac',
  'ppo_kl',
  'pg_clipfrac_lower',
  'token_count',
  'entropy_agg',
  'kl_loss',
  'policy_loss',
] as const;

export interface ActorLossTensors {
  oldLogProb: Tensor;
  logProb: Tensor;
  advantages: Tensor;
  responseMask: Tensor;
  /** Per-token entropy [B, T] when entropyCoeff is used (or the entropy metric wanted). */
  entropy?: Tensor;
  /** Reference log-probs [B, T] when the KL loss is on. */
  refLogProb?: Tensor;
  /** clip_cov / kl_cov: the 0/1 token selection [B, T] (covariance-selection.ts, made on the host). */
  selected?: Tensor;
  /** vanilla / gpg: the 0/1 tokens [B, T] rollout correction's bypass mode keeps after rejection sampling (made on
   *  the host); the policy term and its metrics run over responseMask × policyMask, entropy and KL over responseMask.
   *  */
  policyMask?: Tensor;
  /** Rollout correction's importance weights [B, T] (verl's rollout_is_weights): each token's policy term and its
   *  gradient times its weight (geo_mean: each row's times the geometric mean of its tokens'); metrics unweighted. */
  isWeights?: Tensor;
  /** Output [B, T, 2]: (d loss / d logProb, d loss / d entropy) per token, the LM-head backward's coefficients. */
  grads: Tensor;
  /** Scratch [B, 8]. */
  rowPartials: Tensor;
  /** Output [8], see ACTOR_LOSS_OUTPUTS. */
  out: Tensor;
}

/**
 * The actor loss of one micro-batch, fused: pg_loss (verl's loss_mode) − entropyCoeff·agg(entropy)
 * + klLossCoef·agg(kl). `aggregation` carries the mini-batch's global denominators, so micro-batch losses and
 * gradients add up to the unsplit mini-batch's exactly.
 */
export function computeActorLossGpu(
  engine: Engine,
  t: ActorLossTensors,
  args: {
    config: PolicyLossConfig;
    aggregation: LossAggregation;
    entropyCoeff: number;
    klLossCoef: number;
    klLossType: string;
    B: number;
    T: number;
    /**
     * geo_mean: the sequences its mean runs over (default B; the trainer passes its mini-batch's, so micro-batches
     * add).
     */
    geoMeanRows?: number;
  },
): void {
  const { B, T } = args;
  expectRows('policy-loss', B, T);
  const tokens: [Tensor | undefined, string][] = [
    [t.oldLogProb, 'oldLogProb'],
    [t.logProb, 'logProb'],
    [t.advantages, 'advantages'],
    [t.responseMask, 'responseMask'],
    [t.entropy, 'entropy'],
    [t.refLogProb, 'refLogProb'],
    [t.selected, 'selected'],
    [t.policyMask, 'policyMask'],
    [t.isWeights, 'isWeights'],
  ];
  for (const [tensor, what] of tokens) if (tensor) expectSize('policy-loss', what, tensor, B * T, `[B=${B}, T=${T}]`);
  expectSize('policy-loss', 'grads', t.grads, 2 * B * T, `[B=${B}, T=${T}, 2]`);
  expectSize('policy-loss', 'rowPartials', t.rowPartials, 8 * B, `[B=${B}, 8]`);
  const agg = aggregationUniforms(args.aggregation);
  const mode = args.config.lossMode;
  const spec = lossModeSpec(mode);
  if (!spec) throw new Error(`policy-loss: unknown loss_mode ${mode}`);
  if (spec.covarianceSelection && !t.selected)
    throw new Error(`policy-loss: loss_mode ${mode} needs its token selection (selected)`);
  // Both picks share one binding: the covariance modes never run in bypass mode, which forces vanilla or gpg.
  if (t.policyMask && !spec.takesPolicyMask)
    throw new Error(
      `policy-loss: a policyMask (bypass-mode rejection sampling) applies to loss_mode vanilla or gpg, not ${mode}`,
    );
  // GSPO and SAPO aggregate their policy term as seq-mean-token-mean whatever loss_agg_mode says, as verl does
  // (geo_mean's fixed mean over sequences is its own weight in the kernel).
  const pgAgg = spec.fixedAggregation ? aggregationUniforms({ ...args.aggregation, mode: spec.fixedAggregation }) : agg;
  const kl = parseKlEstimator(args.klLossType);
  engine.dispatch(policyLossSpec, {
    bindings: {
      oldLogProb: t.oldLogProb,
      logProb: t.logProb,
      advantages: t.advantages,
      mask: t.responseMask,
      // Unused inputs are bound to a tensor of the right size; the shader never reads them.
      refLogProb: t.refLogProb ?? t.logProb,
      entropy: t.entropy ?? t.logProb,
      tokenFlags: t.selected ?? t.policyMask ?? t.logProb,
      isWeights: t.isWeights ?? t.logProb,
      grads: t.grads,
      rowPartials: t.rowPartials,
    },
    uniforms: {
      T,
      lossMode: spec.code,
      clipRatioLow: args.config.clipRatioLow,
      clipRatioHigh: args.config.clipRatioHigh,
      clipRatioC: args.config.clipRatioC,
      aggMode: agg.mode,
      aggScale: agg.scale,
      pgAggMode: pgAgg.mode,
      pgAggScale: pgAgg.scale,
      useEntropy: t.entropy ? 1 : 0,
      entropyCoeff: t.entropy ? args.entropyCoeff : 0,
      useKl: t.refLogProb ? 1 : 0,
      klCode: kl.code,
      klStraightThrough: kl.straightThrough ? 1 : 0,
      klCoef: t.refLogProb ? args.klLossCoef : 0,
      tauPos: args.config.tauPos ?? 1,
      tauNeg: args.config.tauNeg ?? 1.05,
      ppoKlCoef: args.config.ppoKlCoef ?? 0.1,
      geoRows: args.geoMeanRows ?? B,
      policyMasked: t.policyMask ? 1 : 0,
      useIsWeights: t.isWeights ? 1 : 0,
      droBeta: args.config.droBeta ?? 0,
    },
    workgroups: [B],
  });
  reduceLossPartials(engine, t.rowPartials, t.out, B, 8, [1, 2, 3], 4);
}
