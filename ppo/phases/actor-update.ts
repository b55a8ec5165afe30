// The actor's PPO update over one step's experience (ppo/training/update-loop.ts runs the epochs, mini-batches and
// AdamW steps): for each micro-batch, teacher-forced log-probs and entropy of the response tokens at the rollout
// temperature, the fused actor loss (clipped policy loss − entropy bonus + KL loss) with its per-token
// gradients, and the model backward. The micro-batch's old log-probs, advantages, reference log-probs and
// rollout_is weights are gathered from the experience's device tensors; its loss outputs wait in the update's
// metric log. With on-policy distillation (distillation.enabled) the distillation loss of the teachers' log-probs
// (kernels/ppo/distillation-loss) adds its gradient to the actor loss's, or replaces it (use_task_rewards=false:
// verl's policy loss is then 0, entropy bonus and KL loss included; the actor/* metrics are still reported).
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
import { computeDistillationLossGpu, distillationPartialTotals } from '../../kernels/ppo/distillation-loss.ts';
import { forwardKlTopkGpu, forwardKlTopkPairsGpu } from '../../kernels/ppo/forward-kl-topk.ts';
import { lmHeadWeightName } from '../../models/parameter-layout.ts';
import type { LogitGradPairs } from '../../kernels/layers/lm-head.ts';
import type { DistillationLossSettings } from '../algorithm/distillation.ts';
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
  /** distillation.distillation_loss when distillation.enabled (the experience then has the teachers' log-probs);
   *  null: off. */
  distillation?: DistillationLossSettings | null;
}

export class ActorUpdater {
  private readonly target: UpdateTarget;

  constructor(
    private readonly engine: Engine,
    private readonly actor: CausalLm,
    private readonly optimizer: AdamWOptimizer,
    /** On-policy distillation's buffers (topk: forward_kl_topk's K); null: off. */
    distillation: { topk: number | null } | null = null,
  ) {
    this.target = {
      optimizer,
      pool: new SequenceBufferPool(engine, actor.config.vocabSize, distillation),
      log: new DeviceMetricLog(engine, 'actor.metrics'),
      gradNormMetric: 'actor/grad_norm',
    };
  }

  async update(x: Experience, config: ActorUpdateConfig, rng: Rng): Promise<Record<string, number>> {
    if (config.useKlLoss && !x.refLogProbs) throw new Error('actor.use_kl_loss needs the reference model');
    if (config.distillation && !x.hasTeacherLogProbs)
      throw new Error("distillation.enabled needs the teachers' log-probs in the experience");
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
    const distillation = config.distillation;
    const logitGrads = distillation
      ? this.distillationLoss(
          x,
          distillation,
          config.temperature,
          { miniBatchRows, aggregation, rows, buffers: b, batch },
          log,
          metrics,
        )
      : null;
    scatterResponseGradsGpu(e, { grads: b.actorGrads, dLogprobs: b.dLogprobs, dEntropy: b.dEntropy, B: m, S, T: R });
    const entropyBonus = config.entropyCoeff !== 0 && (distillation?.use_task_rewards ?? true);
    this.actor.backward(b.dLogprobs, entropyBonus ? b.dEntropy : null, this.optimizer.grads, logitGrads);
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

  /**
   * verl's distillation_ppo_loss: the clamped per-token loss of the student against the teacher, back-propagated
   * (agg_loss) or as the advantage −loss of a vanilla PPO term (use_policy_gradient), times distillation_loss_coef
   * beside the task loss (use_task_rewards), else alone. The sampled-token modes take kl_penalty of the teachers'
   * log-probs; forward_kl_topk the KL over the teacher's top-k from the student's forward (forward-kl-topk.ts),
   * whose back-propagated gradient returns as the LM head's sparse logits pairs. Metrics as verl names them:
   * distillation/loss (summed over micro-batches, before the coefficient), abs_loss (sampled-token modes), loss_min
   * and loss_max (before the clamp), student_mass and teacher_mass with their min and max (forward_kl_topk), and the
   * policy-gradient path's pg_clipfrac, ppo_kl, pg_clipfrac_lower.
   */
  private distillationLoss(
    x: Experience,
    settings: DistillationLossSettings,
    temperature: number,
    { miniBatchRows, aggregation, rows, buffers: b }: MicroBatch,
    log: DeviceMetricLog,
    metrics: MetricAccumulator,
  ): LogitGradPairs | null {
    const d = b.distillation!;
    const m = rows.length;
    const topk = d.topk;
    const shape = topk && {
      m,
      S: b.S,
      R: b.R,
      C: this.actor.config.hiddenSize,
      K: topk.K,
      temperature,
      logProbMinClamp: settings.log_prob_min_clamp,
    };
    if (topk && shape) {
      const t = x.tensors.teacherTopk!;
      // (N, R, K) rows of the experience to the block's (m, R_block, K): one copy per row, as ids are u32.
      rows.forEach((row, i) => {
        const n = b.R * topk.K;
        const from = row * x.R * topk.K;
        this.engine.copy(t.ids.view(`${t.ids.name}[${row}]`, from, [n]), topk.ids.view(topk.ids.name, i * n, [n]));
        this.engine.copy(
          t.logProbs.view(`${t.logProbs.name}[${row}]`, from, [n]),
          topk.logProbs.view(topk.logProbs.name, i * n, [n]),
        );
      });
      const forward = this.actor.lastForward();
      forwardKlTopkGpu(
        this.engine,
        {
          hidden: forward.hidden,
          // The head the forward multiplied by (mixed precision: the compute copy), so the top-k logits are the
          // forward's own, consistent with its lse.
          weight: this.actor.trunk.weights.get(lmHeadWeightName(this.actor.config)),
          lse: forward.lse,
          teacherIds: topk.ids,
          teacherLogProbs: topk.logProbs,
          responseMask: b.responseMask,
          out: topk.out,
          coefs: topk.coefs,
        },
        shape,
      );
    } else b.gatherResponse(d.teacherLogProbs, x.tensors.teacher!);
    computeDistillationLossGpu(
      this.engine,
      {
        logProb: b.logProbs,
        oldLogProb: b.oldLogProbs,
        teacher: topk ? topk.out.view(`${topk.out.name}.kl`, 0, [m, b.R]) : d.teacherLogProbs,
        responseMask: b.responseMask,
        isWeights: x.rolloutIsWeights ? b.isWeights : null,
        grads: b.actorGrads,
        rowPartials: d.partials,
        lossGrad: d.lossGrad,
      },
      {
        lossMode: topk ? 'precomputed' : settings.loss_mode,
        usePolicyGradient: settings.use_policy_gradient,
        lossMaxClamp: settings.loss_max_clamp,
        clipRatioLow: settings.clip_ratio_low,
        clipRatioHigh: settings.clip_ratio_high,
        coef: settings.use_task_rewards ? settings.distillation_loss_coef : 1,
        accumulate: settings.use_task_rewards,
        aggregation,
        B: m,
        T: b.R,
      },
    );
    const logitGrads =
      topk && shape && !settings.use_policy_gradient
        ? { ids: topk.pairIds, coefs: topk.pairCoefs, P: topk.K + 1 }
        : null;
    if (topk && shape && logitGrads)
      forwardKlTopkPairsGpu(
        this.engine,
        {
          lossGrad: d.lossGrad,
          coefs: topk.coefs,
          teacherIds: topk.ids,
          targets: b.targets,
          grads: b.actorGrads,
          pairIds: topk.pairIds,
          pairCoefs: topk.pairCoefs,
        },
        shape,
      );
    log.record(d.partials, (values) => {
      const totals = distillationPartialTotals(values, m);
      checkFiniteRecord('distillation', { loss: totals.loss, abs_loss: totals.abs_loss_sum });
      metrics.addSum(miniBatchRows, 'distillation/loss', totals.loss);
      if (!topk)
        metrics.addMean(
          'distillation/abs_loss',
          totals.abs_loss_sum / Math.max(1, totals.token_count),
          totals.token_count,
        );
      if (totals.token_count > 0) {
        metrics.addExtreme('distillation/loss_min', totals.loss_min, Math.min);
        metrics.addExtreme('distillation/loss_max', totals.loss_max, Math.max);
      }
      if (!settings.use_policy_gradient) return;
      const perToken = (sum: number) => sum / Math.max(1, totals.token_count);
      metrics.addMean('distillation/pg_clipfrac', perToken(totals.pg_clipped), totals.token_count);
      metrics.addMean('distillation/ppo_kl', perToken(totals.ppo_kl_sum), totals.token_count);
      metrics.addMean('distillation/pg_clipfrac_lower', perToken(totals.pg_clipped_lower), totals.token_count);
    });
    if (topk) {
      const mask = responseRows(x.responseMask, x.R, rows, b.R);
      log.record(topk.out.view(`${topk.out.name}.masses`, m * b.R, [2 * m * b.R]), (values) => {
        for (const [k, who] of ['student', 'teacher'].entries()) {
          const masses = values.subarray(k * m * b.R, (k + 1) * m * b.R).filter((_, i) => mask[i] !== 0);
          if (masses.length === 0) continue;
          metrics.addMean(`distillation/${who}_mass`, masses.reduce((a, v) => a + v, 0) / masses.length, masses.length);
          metrics.addExtreme(`distillation/${who}_mass_min`, Math.min(...masses), Math.min);
          metrics.addExtreme(`distillation/${who}_mass_max`, Math.max(...masses), Math.max);
        }
      });
    }
    return logitGrads;
  }
}
