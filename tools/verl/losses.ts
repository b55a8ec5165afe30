// verl's losses (core_algos.agg_loss / compute_policy_loss_{vanilla,gspo,…,bypass_mode} / compute_value_loss /
// compute_entropy_loss and dp_actor's actor-loss composition) on plain arrays, returning the loss, verl's
// metrics and the gradients the model backward consumes. They run the kernels the trainer calls on its
// tensors.
import type { Engine, Tensor } from '../../engine/index.ts';
import { aggLossGpu } from '../../kernels/ppo/agg-loss.ts';
import { computeActorLossGpu, separateActorLossExtras } from '../../kernels/ppo/policy-loss.ts';
import { computeValueLossGpu } from '../../kernels/ppo/value-loss.ts';
import { logprobEntropyBackwardGpu, logprobEntropyGpu } from '../../kernels/ppo/logprob-entropy.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import type { LossAggregation, PolicyLossConfig } from '../../kernels/ppo/ppo-vocabulary.ts';
import { resolvePolicyLossConfig, type PolicyLossOptions } from '../../ppo/algorithm/policy-loss-config.ts';
import { selectCovarianceTokens, shuffledIndices } from '../../kernels/ppo/covariance-selection.ts';
import { torchRandperm } from './torch-randperm.ts';
import { Rng } from '../../engine/rng.ts';
import { readMatrix, sameShape, shapeOf, toMatrix, upload, type Matrix } from './tensors.ts';
import {
  bypassCorrection,
  BYPASS_LOSS_MODES,
  type BypassCorrectionPlan,
} from '../../ppo/algorithm/bypass-correction.ts';

export { resolvePolicyLossConfig, type PolicyLossOptions, type BypassCorrectionPlan };

/** verl's agg_loss keyword arguments; omitted denominators default to this (micro-)batch's own counts. */
export interface AggOptions {
  lossAggMode?: string;
  dpSize?: number;
  /** token-mean: valid tokens of the whole mini-batch (pass it when the mini-batch is split into micro-batches). */
  batchNumTokens?: number;
  /** seq-mean-*: non-empty sequences of the whole mini-batch. */
  globalBatchSize?: number;
  /** seq-mean-token-sum-norm: the constant divisor (default: the response length). */
  lossScaleFactor?: number;
}

export function resolveAggregation(options: AggOptions, mask: Matrix): LossAggregation {
  const { B, T } = shapeOf('response_mask', mask);
  const local = localAggregation(options.lossAggMode ?? 'token-mean', mask.flat(), B, T);
  // As verl: with dp_size > 1 and no global count, the local count is divided out and dp_size still multiplies.
  return {
    mode: local.mode,
    dpSize: options.dpSize ?? 1,
    batchNumTokens: options.batchNumTokens ?? local.batchNumTokens,
    globalBatchSize: options.globalBatchSize ?? local.globalBatchSize,
    lossScaleFactor: options.lossScaleFactor ?? local.lossScaleFactor,
  };
}

/** Scalar loss and d loss / d loss_mat. */
export async function aggLoss(
  engine: Engine,
  lossMat: Matrix,
  lossMask: Matrix,
  options: AggOptions = {},
): Promise<{ loss: number; grad: number[][] }> {
  const { B, T } = shapeOf('loss_mat', lossMat);
  sameShape('loss_mask', lossMask, { B, T });
  const grad = engine.tensor('grad', [B, T]);
  const out = engine.tensor('agg_loss', [2]);
  aggLossGpu(engine, {
    lossMat: upload(engine, 'loss_mat', lossMat),
    lossMask: upload(engine, 'loss_mask', lossMask),
    aggregation: resolveAggregation(options, lossMask),
    grad,
    rowPartials: engine.tensor('row_partials', [B, 2]),
    out,
    B,
    T,
  });
  return { loss: (await engine.read(out))[0], grad: await readMatrix(engine, grad, B, T) };
}

export interface ActorLossResult {
  pgLoss: number;
  metrics: Record<string, number>;
  entropyAgg: number;
  klLoss: number;
  policyLoss: number;
  /** d policy_loss / d log_prob [B, T]. */
  gradLogProb: number[][];
  /** d policy_loss / d entropy [B, T]. */
  gradEntropy: number[][];
}

/**
 * The trainer's host-side covariance pick of clip_cov / kl_cov. With a `seed` clip_cov draws torch.randperm after
 * torch.manual_seed(seed), as a verl run seeded just before the call does; without one, the trainer's generator.
 */
async function covarianceSelection(
  engine: Engine,
  config: PolicyLossConfig,
  args: {
    oldLogProb: Matrix;
    logProb: Tensor;
    advantages: Matrix;
    responseMask: Matrix;
    seed?: number;
  },
): Promise<Tensor | undefined> {
  if (config.lossMode !== 'clip_cov' && config.lossMode !== 'kl_cov') return undefined;
  const rng = new Rng(0);
  const permutation =
    args.seed === undefined ? shuffledIndices(() => rng.next()) : (n: number) => torchRandperm(n, args.seed!);
  const selected = selectCovarianceTokens(
    config.lossMode,
    {
      oldLogProb: args.oldLogProb.flat(),
      logProb: await engine.read(args.logProb),
      advantages: args.advantages.flat(),
      responseMask: args.responseMask.flat(),
      clipRatioLow: config.clipRatioLow,
      clipRatioHigh: config.clipRatioHigh,
      clipCovRatio: config.clipCovRatio!,
      clipCovLb: config.clipCovLb!,
      clipCovUb: config.clipCovUb!,
      klCovRatio: config.klCovRatio!,
    },
    permutation,
  );
  return engine.tensorFrom('selected', [args.responseMask.length, args.responseMask[0].length], selected);
}

async function actorLoss(
  engine: Engine,
  args: {
    oldLogProb: Matrix;
    logProb: Tensor;
    advantages: Matrix;
    responseMask: Matrix;
    entropy?: Tensor;
    refLogProb?: Matrix;
    policyMask?: Matrix;
    entropyCoeff?: number;
    klLossCoef?: number;
    klLossType?: string;
    B: number;
    T: number;
    seed?: number;
    /** verl's rollout_is_weights, which the kernel multiplies into the policy loss. */
    rolloutIsWeights?: Matrix;
  } & PolicyLossOptions &
    AggOptions,
): Promise<{ result: ActorLossResult; grads: Tensor }> {
  const { B, T } = args;
  const config = resolvePolicyLossConfig(args);
  for (const [name, m] of [
    ['old_log_prob', args.oldLogProb],
    ['advantages', args.advantages],
    ['response_mask', args.responseMask],
  ] as const)
    sameShape(name, m, { B, T });
  if (args.refLogProb) sameShape('ref_log_prob', args.refLogProb, { B, T });
  if (args.policyMask) sameShape('policy_mask', args.policyMask, { B, T });
  if (args.rolloutIsWeights) sameShape('rollout_is_weights', args.rolloutIsWeights, { B, T });
  const grads = engine.tensor('grads', [B, T, 2]);
  const out = engine.tensor('actor_loss', [8]);
  computeActorLossGpu(
    engine,
    {
      oldLogProb: upload(engine, 'old_log_prob', args.oldLogProb),
      logProb: args.logProb,
      advantages: upload(engine, 'advantages', args.advantages),
      responseMask: upload(engine, 'response_mask', args.responseMask),
      ...separateActorLossExtras(engine, B, T, {
        entropy: args.entropy,
        refLogProb: args.refLogProb ? upload(engine, 'ref_log_prob', args.refLogProb) : undefined,
        selected: await covarianceSelection(engine, config, args),
        policyMask: args.policyMask ? upload(engine, 'policy_mask', args.policyMask) : undefined,
        isWeights: args.rolloutIsWeights ? upload(engine, 'rollout_is_weights', args.rolloutIsWeights) : undefined,
      }),
      grads,
      rowPartials: engine.tensor('row_partials', [B, 8]),
      out,
    },
    {
      config,
      aggregation: resolveAggregation(args, args.responseMask),
      entropyCoeff: args.entropyCoeff ?? 0,
      klLossCoef: args.klLossCoef ?? 0,
      klLossType: args.klLossType ?? 'low_var_kl',
      B,
      T,
    },
  );
  const [pgLoss, pgClipfrac, ppoKl, pgClipfracLower, , entropyAgg, klLoss, policyLoss] = await engine.read(out);
  const g = await engine.read(grads);
  return {
    grads,
    result: {
      pgLoss,
      entropyAgg,
      klLoss,
      policyLoss,
      metrics: { 'actor/pg_clipfrac': pgClipfrac, 'actor/ppo_kl': ppoKl, 'actor/pg_clipfrac_lower': pgClipfracLower },
      gradLogProb: toMatrix(
        g.filter((_, i) => i % 2 === 0),
        B,
        T,
      ),
      gradEntropy: toMatrix(
        g.filter((_, i) => i % 2 === 1),
        B,
        T,
      ),
    },
  };
}

/** verl's compute_policy_loss_<loss_mode> plus the optional entropy bonus and KL loss of dp_actor; policyMask: the
 *  policy term's own 0/1 mask (bypass mode's rejection), entropy and KL keeping responseMask; rolloutIsWeights:
 *  verl's rollout_is_weights argument (the metrics stay those of the unweighted loss, as in verl). */
export async function computePolicyLoss(
  engine: Engine,
  args: {
    oldLogProb: Matrix;
    logProb: Matrix;
    advantages: Matrix;
    responseMask: Matrix;
    policyMask?: Matrix;
    rolloutIsWeights?: Matrix;
    entropy?: Matrix;
    entropyCoeff?: number;
    refLogProb?: Matrix;
    klLossCoef?: number;
    klLossType?: string;
    seed?: number;
  } & PolicyLossOptions &
    AggOptions,
): Promise<ActorLossResult> {
  const { B, T } = shapeOf('log_prob', args.logProb);
  return (
    await actorLoss(engine, {
      ...args,
      logProb: upload(engine, 'log_prob', args.logProb),
      entropy: args.entropy ? upload(engine, 'entropy', args.entropy) : undefined,
      B,
      T,
    })
  ).result;
}

/** verl's compute_policy_loss_bypass_mode (old_log_prob = the rollout's): bypass-correction.ts's weights, rejection
 *  and metrics against log_prob, then the loss its loss_type runs — as each trainer micro-batch does. */
export async function computePolicyLossBypassMode(
  engine: Engine,
  args: {
    oldLogProb: Matrix;
    logProb: Matrix;
    advantages: Matrix;
    responseMask: Matrix;
    correction: BypassCorrectionPlan;
  } & PolicyLossOptions &
    AggOptions,
): Promise<ActorLossResult> {
  const { B, T } = shapeOf('log_prob', args.logProb);
  const flat = (m: Matrix) => Float32Array.from(m.flat());
  const correction = bypassCorrection(
    args.correction,
    flat(args.logProb),
    flat(args.oldLogProb),
    flat(args.responseMask),
    B,
    T,
  );
  // verl hands the loss the rejection's mask as its response_mask: agg_loss's local denominators count what it kept.
  const policyMask = correction.policyMask ? toMatrix(correction.policyMask, B, T) : undefined;
  const local = resolveAggregation(args, policyMask ?? args.responseMask);
  const result = await computePolicyLoss(engine, {
    ...args,
    batchNumTokens: local.batchNumTokens,
    globalBatchSize: local.globalBatchSize,
    lossScaleFactor: local.lossScaleFactor,
    lossMode: BYPASS_LOSS_MODES[args.correction.lossType],
    rolloutIsWeights: correction.lossWeights ? toMatrix(correction.lossWeights, B, T) : undefined,
    policyMask,
  });
  return { ...result, metrics: { ...result.metrics, ...correction.metrics } };
}

type Logits = readonly (readonly (readonly number[])[])[];

function logitsShape(logits: Logits): { B: number; T: number; V: number } {
  const B = logits.length;
  const T = logits[0]?.length ?? 0;
  const V = logits[0]?.[0]?.length ?? 0;
  if (!logits.every((row) => row.length === T && row.every((v) => v.length === V)) || B * T * V === 0) {
    throw new Error(`logits: expected a non-empty [B, T, V] array, got a ragged or empty one (first row [${T}, ${V}])`);
  }
  return { B, T, V };
}

function uploadLogits(
  engine: Engine,
  logits: Logits,
  labels: Matrix | null,
): { logits: Tensor; labels: Tensor; B: number; T: number; V: number } {
  const { B, T, V } = logitsShape(logits);
  if (labels) sameShape('labels', labels, { B, T });
  const ids = labels ? labels.flat() : new Array<number>(B * T).fill(0);
  ids.forEach((id, i) => {
    if (!Number.isInteger(id) || id < 0 || id >= V)
      throw new Error(`labels: entry ${i} is ${id}, expected a token id in [0, ${V})`);
  });
  return {
    logits: engine.tensorFrom('logits', [B, T, V], Float32Array.from(logits.flat(2))),
    labels: engine.tensorFrom('labels', [B, T], ids, 'u32'),
    B,
    T,
    V,
  };
}

/**
 * Per-token log-probs of `labels` and entropies from logits [B, T, V] (verl's logprobs_from_logits /
 * entropy_from_logits).
 */
export async function logprobsAndEntropyFromLogits(
  engine: Engine,
  logits: Logits,
  labels: Matrix | null,
): Promise<{ logProb: number[][]; entropy: number[][] }> {
  const t = uploadLogits(engine, logits, labels);
  const logProb = engine.tensor('log_prob', [t.B, t.T]);
  const entropy = engine.tensor('entropy', [t.B, t.T]);
  logprobEntropyGpu(engine, { logits: t.logits, labels: t.labels, logProb, entropy, N: t.B * t.T, V: t.V });
  return { logProb: await readMatrix(engine, logProb, t.B, t.T), entropy: await readMatrix(engine, entropy, t.B, t.T) };
}

/** d/d logits [B, T, V] of Σ (gradLogProb·log_prob + gradEntropy·entropy). */
export async function logitsBackward(
  engine: Engine,
  logits: Logits,
  labels: Matrix | null,
  gradLogProb: Matrix | null,
  gradEntropy: Matrix | null,
): Promise<number[][][]> {
  const t = uploadLogits(engine, logits, labels);
  const N = t.B * t.T;
  const coefficients = new Float32Array(2 * N);
  for (let i = 0; i < N; i++) {
    coefficients[2 * i] = gradLogProb ? gradLogProb[Math.floor(i / t.T)][i % t.T] : 0;
    coefficients[2 * i + 1] = gradEntropy ? gradEntropy[Math.floor(i / t.T)][i % t.T] : 0;
  }
  const gradLogits = engine.tensor('grad_logits', [t.B, t.T, t.V]);
  logprobEntropyBackwardGpu(engine, {
    logits: t.logits,
    labels: t.labels,
    coefficients: engine.tensorFrom('coefficients', [N, 2], coefficients),
    gradLogits,
    N,
    V: t.V,
  });
  const g = await engine.read(gradLogits);
  return Array.from({ length: t.B }, (_, b) => toMatrix(g.subarray(b * t.T * t.V, (b + 1) * t.T * t.V), t.T, t.V));
}

/** verl's compute_entropy_loss: agg(entropy_from_logits(logits)) and its gradient w.r.t. the logits. */
export async function computeEntropyLoss(
  engine: Engine,
  logits: Logits,
  responseMask: Matrix,
  options: AggOptions = {},
): Promise<{ entropyLoss: number; gradLogits: number[][][] }> {
  const { entropy } = await logprobsAndEntropyFromLogits(engine, logits, null);
  const { loss, grad } = await aggLoss(engine, entropy, responseMask, options);
  return { entropyLoss: loss, gradLogits: await logitsBackward(engine, logits, null, null, grad) };
}

/** The full actor loss from logits: log-probs and entropy of the responses, then computePolicyLoss, then d/d logits. */
export async function computeActorLossFromLogits(
  engine: Engine,
  args: {
    logits: Logits;
    responses: Matrix;
    oldLogProb: Matrix;
    advantages: Matrix;
    responseMask: Matrix;
    entropyCoeff?: number;
    refLogProb?: Matrix;
    klLossCoef?: number;
    klLossType?: string;
  } & PolicyLossOptions &
    AggOptions,
): Promise<ActorLossResult & { logProb: number[][]; entropy: number[][]; gradLogits: number[][][] }> {
  const t = uploadLogits(engine, args.logits, args.responses);
  const N = t.B * t.T;
  const logProb = engine.tensor('log_prob', [t.B, t.T]);
  const entropy = engine.tensor('entropy', [t.B, t.T]);
  logprobEntropyGpu(engine, { logits: t.logits, labels: t.labels, logProb, entropy, N, V: t.V });
  const { result, grads } = await actorLoss(engine, { ...args, logProb, entropy, B: t.B, T: t.T });
  const gradLogits = engine.tensor('grad_logits', [t.B, t.T, t.V]);
  logprobEntropyBackwardGpu(engine, { logits: t.logits, labels: t.labels, coefficients: grads, gradLogits, N, V: t.V });
  const g = await engine.read(gradLogits);
  return {
    ...result,
    logProb: await readMatrix(engine, logProb, t.B, t.T),
    entropy: await readMatrix(engine, entropy, t.B, t.T),
    gradLogits: Array.from({ length: t.B }, (_, b) =>
      toMatrix(g.subarray(b * t.T * t.V, (b + 1) * t.T * t.V), t.T, t.V),
    ),
  };
}

/** verl's compute_value_loss: 0.5·agg(clipped squared error), vf_clipfrac, and d vf_loss / d vpreds. */
export async function computeValueLoss(
  engine: Engine,
  args: {
    vpreds: Matrix;
    returns: Matrix;
    values: Matrix;
    responseMask: Matrix;
    cliprangeValue: number;
  } & AggOptions,
): Promise<{ vfLoss: number; vfClipfrac: number; gradVpreds: number[][] }> {
  const { B, T } = shapeOf('vpreds', args.vpreds);
  for (const [name, m] of [
    ['returns', args.returns],
    ['values', args.values],
    ['response_mask', args.responseMask],
  ] as const)
    sameShape(name, m, { B, T });
  const gradVpreds = engine.tensor('grad_vpreds', [B, T]);
  const out = engine.tensor('value_loss', [3]);
  computeValueLossGpu(engine, {
    vpreds: upload(engine, 'vpreds', args.vpreds),
    returns: upload(engine, 'returns', args.returns),
    values: upload(engine, 'values', args.values),
    responseMask: upload(engine, 'response_mask', args.responseMask),
    gradVpreds,
    rowPartials: engine.tensor('row_partials', [B, 3]),
    out,
    cliprangeValue: args.cliprangeValue,
    aggregation: resolveAggregation(args, args.responseMask),
    B,
    T,
  });
  const [vfLoss, vfClipfrac] = await engine.read(out);
  return { vfLoss, vfClipfrac, gradVpreds: await readMatrix(engine, gradVpreds, B, T) };
}
