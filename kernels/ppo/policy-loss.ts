import source from './policy-loss.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize } from '../../engine/index.ts';
import {
  aggregationUniforms,
  expectRows,
  withKlEstimators,
  withVanillaPolicyTerm,
  withWorkgroupReduce,
} from './ppo-shared.ts';
import { reduceLossPartials } from './loss-partials.ts';
import { parseKlEstimator, type LossAggregation, type PolicyLossConfig } from './ppo-vocabulary.ts';
import { lossModeSpec, policyLossModeConstants } from './policy-loss-modes.ts';

export const policyLossSpec: KernelSpec = {
  name: 'policy-loss',
  source: withWorkgroupReduce(withKlEstimators(withVanillaPolicyTerm(`${policyLossModeConstants()}\n${source}`))),
  bindings: [
    { name: 'oldLogProb', access: 'read' },
    { name: 'logProb', access: 'read' },
    { name: 'advantages', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'extras', access: 'read' },
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
    { name: 'plane', type: 'u32' },
  ],
};

/**
 * The actor loss's four optional per-token inputs, each [B, T], as planes of one tensor, so that the kernel binds
 * them as one storage buffer and fits WebGPU's default 8. Each plane starts at a device-aligned offset, so the
 * kernels and uploads that fill it (a gather of the reference log-probs, the LM head's entropy, the host's token
 * picks and weights) write it as a tensor of its own; the loss costs no packing pass.
 */
export interface ActorLossExtras {
  /** [4, plane]: the planes below, in this order. */
  planes: Tensor;
  /** Elements from one plane's start to the next: B·T rounded up to the device's storage offset alignment. */
  plane: number;
  /** Reference log-probs, read when the KL loss is on. */
  refLogProb: Tensor;
  /** Per-token entropy, read when entropyCoeff is used (or the entropy metric wanted). */
  entropy: Tensor;
  /** A 0/1 pick per token made on the host: clip_cov / kl_cov's selection, or bypass mode's kept tokens. */
  tokenFlags: Tensor;
  /** Rollout correction's importance weights (verl's rollout_is_weights). */
  isWeights: Tensor;
}

function extrasPlane(engine: Engine, B: number, T: number): number {
  const align = engine.caps.minStorageBufferOffsetAlignment / 4;
  return Math.ceil((B * T) / align) * align;
}

/** Elements of the tensor that holds the actor loss's extras for [B, T] on `engine`'s device. */
export function actorLossExtrasSize(engine: Engine, B: number, T: number): number {
  return 4 * extrasPlane(engine, B, T);
}

/** The planes of `planes` (at least actorLossExtrasSize elements) as [B, T] tensors. */
export function actorLossExtras(engine: Engine, planes: Tensor, B: number, T: number): ActorLossExtras {
  const plane = extrasPlane(engine, B, T);
  expectSize('policy-loss', 'extras', planes, 4 * plane, `[4, ${plane}] (B=${B}, T=${T})`, 'at least');
  const view = (k: number, name: string) => planes.view(`${planes.name}.${name}`, k * plane, [B, T]);
  return {
    planes,
    plane,
    refLogProb: view(0, 'refLogProb'),
    entropy: view(1, 'entropy'),
    tokenFlags: view(2, 'tokenFlags'),
    isWeights: view(3, 'isWeights'),
  };
}

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

/**
 * `extras` and `uses` for a caller that holds the optional inputs as tensors of their own (tests, tools/verl, the
 * kernel lab): a new planes tensor filled by buffer copies, no dispatch.
 */
export function separateActorLossExtras(
  engine: Engine,
  B: number,
  T: number,
  inputs: { entropy?: Tensor; refLogProb?: Tensor; selected?: Tensor; policyMask?: Tensor; isWeights?: Tensor },
): Pick<ActorLossTensors, 'extras' | 'uses'> {
  const extras = actorLossExtras(
    engine,
    engine.tensor('policy-loss.extras', [actorLossExtrasSize(engine, B, T)]),
    B,
    T,
  );
  const copies: [Tensor | undefined, Tensor][] = [
    [inputs.refLogProb, extras.refLogProb],
    [inputs.entropy, extras.entropy],
    [inputs.selected ?? inputs.policyMask, extras.tokenFlags],
    [inputs.isWeights, extras.isWeights],
  ];
  for (const [source, plane] of copies) if (source) engine.copy(source, plane);
  const uses = {
    entropy: inputs.entropy !== undefined,
    refLogProb: inputs.refLogProb !== undefined,
    selected: inputs.selected !== undefined,
    policyMask: inputs.policyMask !== undefined,
    isWeights: inputs.isWeights !== undefined,
  };
  return { extras, uses };
}

export interface ActorLossTensors {
  oldLogProb: Tensor;
  logProb: Tensor;
  advantages: Tensor;
  responseMask: Tensor;
  /** The optional inputs, read where `uses` says. */
  extras: ActorLossExtras;
  uses: {
    /** extras.entropy: entropyCoeff is used (or the entropy metric wanted). */
    entropy?: boolean;
    /** extras.refLogProb: the KL loss is on. */
    refLogProb?: boolean;
    /** extras.tokenFlags is clip_cov / kl_cov's token selection (covariance-selection.ts, made on the host). */
    selected?: boolean;
    /** extras.tokenFlags is the tokens rollout correction's bypass mode keeps after rejection sampling (vanilla /
     *  gpg); the policy term and its metrics run over responseMask × tokenFlags, entropy and KL over responseMask. */
    policyMask?: boolean;
    /** extras.isWeights: each token's policy term and its gradient times its weight (geo_mean: each row's times the
     *  geometric mean of its tokens'); metrics unweighted. */
    isWeights?: boolean;
  };
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
  const tokens: [Tensor, string][] = [
    [t.oldLogProb, 'oldLogProb'],
    [t.logProb, 'logProb'],
    [t.advantages, 'advantages'],
    [t.responseMask, 'responseMask'],
  ];
  for (const [tensor, what] of tokens) expectSize('policy-loss', what, tensor, B * T, `[B=${B}, T=${T}]`);
  if (t.extras.plane !== extrasPlane(engine, B, T))
    throw new Error(`policy-loss: extras laid out for ${t.extras.plane} elements a plane, expected [B=${B}, T=${T}]'s`);
  const uses = t.uses;
  expectSize('policy-loss', 'grads', t.grads, 2 * B * T, `[B=${B}, T=${T}, 2]`);
  expectSize('policy-loss', 'rowPartials', t.rowPartials, 8 * B, `[B=${B}, 8]`);
  const agg = aggregationUniforms(args.aggregation);
  const mode = args.config.lossMode;
  const spec = lossModeSpec(mode);
  if (!spec) throw new Error(`policy-loss: unknown loss_mode ${mode}`);
  if (spec.covarianceSelection && !uses.selected)
    throw new Error(`policy-loss: loss_mode ${mode} needs its token selection (selected)`);
  // Both picks share one plane: the covariance modes never run in bypass mode, which forces vanilla or gpg.
  if (uses.policyMask && !spec.takesPolicyMask)
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
      extras: t.extras.planes,
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
      useEntropy: uses.entropy ? 1 : 0,
      entropyCoeff: uses.entropy ? args.entropyCoeff : 0,
      useKl: uses.refLogProb ? 1 : 0,
      klCode: kl.code,
      klStraightThrough: kl.straightThrough ? 1 : 0,
      klCoef: uses.refLogProb ? args.klLossCoef : 0,
      tauPos: args.config.tauPos ?? 1,
      tauNeg: args.config.tauNeg ?? 1.05,
      ppoKlCoef: args.config.ppoKlCoef ?? 0.1,
      geoRows: args.geoMeanRows ?? B,
      policyMasked: uses.policyMask ? 1 : 0,
      useIsWeights: uses.isWeights ? 1 : 0,
      droBeta: args.config.droBeta ?? 0,
      plane: t.extras.plane,
    },
    workgroups: [B],
  });
  reduceLossPartials(engine, t.rowPartials, t.out, B, 8, [1, 2, 3], 4);
}
