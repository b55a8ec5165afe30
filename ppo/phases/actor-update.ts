// The actor's PPO update over one step's experience (ppo/training/update-loop.ts runs the epochs, mini-batches and
// AdamW steps): for each micro-batch, teacher-forced log-probs and entropy of the response tokens at the rollout
// temperature, the fused actor loss (clipped policy loss − entropy bonus + KL loss) with its per-token
// gradients, and the model backward. The micro-batch's old log-probs, advantages, reference log-probs and
// rollout_is weights are gathered from the experience's device tensors; its loss outputs wait in the update's
// metric log.
import { lossModeSpec } from '../../kernels/ppo/policy-loss-modes.ts';
import type { Engine } from '../../engine/index.ts';
import type { Rng } from '../../engine/rng.ts';
import type { CausalLm } from '../../models/causal-lm.ts';
import type { AdamWOptimizer } from '../training/adamw-optimizer.ts';
import type { Experience } from './experience.ts';
import { SequenceBufferPool } from '../training/sequence-buffers.ts';
import { runUpdate, type MicroBatch, type ScheduleConfig, type UpdateTarget } from '../training/update-loop.ts';
import type { MetricAccumulator } from '../training/metric-accumulator.ts';
import { DeviceMetricLog } from '../training/device-metric-log.ts';
import { checkFiniteRecord } from '../training/finite-guard.ts';
import { gatherResponseValuesGpu } from '../../kernels/ppo/response-values.ts';
import { computeActorLossGpu, ACTOR_LOSS_OUTPUTS } from '../../kernels/ppo/policy-loss.ts';
import { scatterResponseGradsGpu } from '../../kernels/ppo/response-grads.ts';
import type { PolicyLossConfig } from '../../kernels/ppo/ppo-vocabulary.ts';
import { selectCovarianceTokens, shuffledIndices } from '../../kernels/ppo/covariance-selection.ts';
import { bypassCorrection, type BypassCorrectionPlan } from '../algorithm/bypass-correction.ts';
import { responseRows } from '../training/batch-rows.ts';

export interface ActorUpdateConfig extends ScheduleConfig {
  policyLoss: PolicyLossConfig;
  entropyCoeff: number;
  useKlLoss: boolean;
  klLossCoef: number;
  klLossType: string;
  temperature: number;
  /** algorithm.rollout_correction.bypass_mode: the old log-probs are the rollout's, and each micro-batch weighs and
   *  rejects against the current policy; null: off. */
  bypass: BypassCorrectionPlan | null;
}

export class ActorUpdater {
  private readonly target: UpdateTarget;

  constructor(
    private readonly engine: Engine,
    private readonly actor: CausalLm,
    private readonly optimizer: AdamWOptimizer,
  ) {
    this.target = {
      optimizer,
      pool: new SequenceBufferPool(engine, actor.config.vocabSize),
      log: new DeviceMetricLog(engine, 'actor.metrics'),
      gradNormMetric: 'actor/grad_norm',
    };
  }

  async update(x: Experience, config: ActorUpdateConfig, rng: Rng): Promise<Record<string, number>> {
    if (config.useKlLoss && !x.refLogProbs) throw new Error('actor.use_kl_loss needs the reference model');
    const result = await runUpdate(x, config, rng, this.target, (micro, log, metrics) =>
      this.lossAndBackward(x, config, micro, log, metrics, rng),
    );
    if (!config.useKlLoss) delete result['actor/kl_loss'];
    result['actor/lr'] = config.lr;
    return result;
  }

  /**
   * clip_cov / kl_cov pick tokens by a covariance over the whole micro-batch (as verl's loss function sees it): the
   * pick is made on the host from the micro-batch's log-probs (and the host copies of the old log-probs and
   * advantages: the plain ones, as verl's pick, whatever rollout_is weights the loss), one read-back of m×R floats
   * per micro-batch that only these two modes pay, and uploaded as a 0/1 flag per token.
   */
  private async covarianceSelection(
    x: Experience,
    config: PolicyLossConfig,
    rows: readonly number[],
    b: MicroBatch['buffers'],
    rng: Rng,
  ): Promise<void> {
    const pick = (all: Float32Array) => responseRows(all, x.R, rows, b.R);
    const selected = selectCovarianceTokens(
      config.lossMode as 'clip_cov' | 'kl_cov',
      {
        oldLogProb: pick(x.oldLogProbs),
        logProb: await this.microBatchLogProbs(rows, b),
        advantages: pick(x.advantages),
        responseMask: pick(x.responseMask),
        clipRatioLow: config.clipRatioLow,
        clipRatioHigh: config.clipRatioHigh,
        clipCovRatio: config.clipCovRatio!,
        clipCovLb: config.clipCovLb!,
        clipCovUb: config.clipCovUb!,
        klCovRatio: config.klCovRatio!,
      },
      shuffledIndices(() => rng.next()),
    );
    this.engine.upload(b.tokenFlags, selected);
  }

  /**
   * Bypass mode (verl's compute_policy_loss_bypass_mode): the micro-batch's importance weights, rejection and
   * mismatch metrics against the current policy, whose log-probs come back to the host (one read-back of m×R floats
   * per micro-batch, as clip_cov's). The kept tokens go up as the policy term's mask, reinforce's importance
   * weights as the loss's weights. Metrics are averaged over micro-batches, as verl's reduce_metrics does.
   * Returns which of the two were uploaded.
   */
  private async bypassCorrection(
    x: Experience,
    plan: BypassCorrectionPlan,
    rows: readonly number[],
    b: MicroBatch['buffers'],
    metrics: MetricAccumulator,
  ): Promise<{ policyMask: boolean; isWeights: boolean }> {
    const pick = (all: Float32Array) => responseRows(all, x.R, rows, b.R);
    // In bypass mode the experience's old log-probs are the rollout's own.
    const correction = bypassCorrection(
      plan,
      await this.microBatchLogProbs(rows, b),
      pick(x.oldLogProbs),
      pick(x.responseMask),
      rows.length,
      b.R,
    );
    for (const [name, value] of Object.entries(correction.metrics)) metrics.addMean(name, value, 1);
    if (correction.lossWeights) this.engine.upload(b.isWeights, correction.lossWeights);
    if (correction.policyMask) this.engine.upload(b.tokenFlags, correction.policyMask);
    return { policyMask: correction.policyMask !== null, isWeights: correction.lossWeights !== null };
  }

  /** The micro-batch's current log-probs (m, R) on the host. */
  private async microBatchLogProbs(rows: readonly number[], b: MicroBatch['buffers']): Promise<Float32Array> {
    return ((await this.engine.read(b.logProbs)) as Float32Array).subarray(0, rows.length * b.R);
  }

  private async lossAndBackward(
    x: Experience,
    config: ActorUpdateConfig,
    { miniBatchRows, aggregation, rows, buffers: b, batch }: MicroBatch,
    log: DeviceMetricLog,
    metrics: MetricAccumulator,
    rng: Rng,
  ): Promise<void> {
    const e = this.engine;
    const { S, R } = b;
    const m = rows.length;
    b.gatherResponse(b.oldLogProbs, x.tensors.old);
    b.gatherResponse(b.advantages, x.tensors.advantages);
    if (x.rolloutIsWeights) b.gatherResponse(b.isWeights, x.tensors.rolloutIsWeights);
    if (config.useKlLoss) b.gatherResponse(b.refLogProbs, x.tensors.ref);

    const out = this.actor.tokenLogprobs(batch, b.targets, { temperature: config.temperature, saveForBackward: true });
    gatherResponseValuesGpu(e, out.logprobs, b.logProbs, m, S, R);
    gatherResponseValuesGpu(e, out.entropy, b.entropy, m, S, R);
    const covariance = lossModeSpec(config.policyLoss.lossMode)?.covarianceSelection === true;
    if (covariance) await this.covarianceSelection(x, config.policyLoss, rows, b, rng);
    const bypass = config.bypass ? await this.bypassCorrection(x, config.bypass, rows, b, metrics) : null;
    computeActorLossGpu(
      e,
      {
        oldLogProb: b.oldLogProbs,
        logProb: b.logProbs,
        advantages: b.advantages,
        responseMask: b.responseMask,
        extras: b.actorExtras,
        uses: {
          entropy: true,
          refLogProb: config.useKlLoss,
          selected: covariance,
          policyMask: bypass?.policyMask,
          isWeights: Boolean(x.rolloutIsWeights) || bypass?.isWeights,
        },
        grads: b.actorGrads,
        rowPartials: b.actorPartials,
        out: b.actorOut,
      },
      {
        config: config.policyLoss,
        aggregation,
        entropyCoeff: config.entropyCoeff,
        klLossCoef: config.klLossCoef,
        klLossType: config.klLossType,
        B: m,
        T: R,
        geoMeanRows: miniBatchRows.length,
      },
    );
    scatterResponseGradsGpu(e, { grads: b.actorGrads, dLogprobs: b.dLogprobs, dEntropy: b.dEntropy, B: m, S, T: R });
    this.actor.backward(b.dLogprobs, config.entropyCoeff !== 0 ? b.dEntropy : null, this.optimizer.grads);
    log.record(b.actorOut, (values) => {
      // Loss terms are already scaled to the mini-batch, so micro-batches add; ratios are per micro-batch means.
      const named = Object.fromEntries(ACTOR_LOSS_OUTPUTS.map((name, i) => [name, values[i]]));
      checkFiniteRecord('actor', named);
      metrics.addSum(miniBatchRows, 'actor/pg_loss', named.pg_loss);
      metrics.addSum(miniBatchRows, 'actor/entropy', named.entropy_agg);
      metrics.addSum(miniBatchRows, 'actor/kl_loss', named.kl_loss);
      metrics.addSum(miniBatchRows, 'actor/policy_loss', named.policy_loss);
      metrics.addMean('actor/pg_clipfrac', named.pg_clipfrac, named.token_count);
      metrics.addMean('actor/pg_clipfrac_lower', named.pg_clipfrac_lower, named.token_count);
      metrics.addMean('actor/ppo_kl', named.ppo_kl, named.token_count);
    });
  }
}
