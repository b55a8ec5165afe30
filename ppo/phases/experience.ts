// Turns a rollout into PPO experience, one phase per method, called by the trainer in verl's order: scores on
// each response's last token with the reward mask applied (begin) → reference log-probs → critic values →
// KL penalty in the reward → advantages and returns (→ PF-PPO's resampled rows). Forwards run in micro-batches of
// sequences on the GPU; the reference log-probs and values are gathered straight into the batch's (N, R) tensors,
// which stay on the device: the updates gather each micro-batch's rows from them (SequenceBuffers.gatherResponse).
// The host gets one copy of what the step's metrics and host-side logic read (token rewards, advantages, returns,
// values, reference log-probs), in one read-back when the advantages are done, and the recomputed old log-probs
// (with Σπ² when calculate_sum_pi_squared asks for it) in one read-back when they are recomputed (rollout_corr/*
// metrics, rollout correction and verl's variance_proxy/* metrics are computed on the host).
import type { Engine, Tensor } from '../../engine/index.ts';
import type { CausalLm } from '../../models/causal-lm.ts';
import type { ValueModel } from '../../models/value-model.ts';
import type { RolloutBatch } from '../generation/types.ts';
import { SequenceBufferPool, type SequenceBuffers } from '../training/sequence-buffers.ts';
import { GrowingBuffers } from '../../models/growing-buffers.ts';
import { planMicroBatches, type MicroBatching } from '../training/micro-batches.ts';
import { gatherResponseValuesGpu } from '../../kernels/ppo/response-values.ts';
import { applyKlInRewardGpu } from '../algorithm/kl-in-reward.ts';
import { computeAdvantagesGpu } from '../algorithm/advantage-estimators.ts';
import { gdpoRewardKeyScores, type GdpoRewardKeys } from '../algorithm/gdpo.ts';
import { SUM_PI_SQUARED_ESTIMATORS } from '../config/schema.ts';
import type { KLController } from '../algorithm/kl-controller.ts';
import type { RewardMask } from '../algorithm/reward-mask.ts';
import { rolloutMismatchMetrics } from '../algorithm/rollout-correction.ts';
import { gatherRows } from '../../kernels/util/gather-rows.ts';
import { rolloutRows, responseRows } from '../training/batch-rows.ts';

/** The algorithm's settings for these phases, resolved once from the config (ppo/step-plan.ts). */
export interface ExperiencePlan {
  advEstimator: string;
  gamma: number;
  lam: number;
  normAdvByStdInGrpo: boolean;
  /** gdpo: algorithm.gdpo_reward_keys and gdpo_reward_weights (null keys: token_level_rewards alone). */
  gdpo?: GdpoRewardKeys | null;
  useKlInReward: boolean;
  klPenalty: string;
  temperature: number;
  /** actor_rollout_ref.rollout.calculate_log_probs: old log-probs from the training forward, the sampler's kept. */
  calculateLogProbs: boolean;
  /** actor_rollout_ref.actor.calculate_sum_pi_squared: the old-log-prob forward (run for it if calculate_log_probs
   *  is off, as verl always recomputes) also gives Σ_v π_v² per response token, for the optimal token baselines and the
   *  variance_proxy/* metrics. */
  calculateSumPiSquared: boolean;
  /** Sequences (null: the whole batch) or tokens per forward of the old log-probs' recomputation. */
  oldForward: MicroBatching;
  /** Sequences (null: the whole batch) or tokens per forward of the reference and of the critic. */
  refForward: MicroBatching;
  valueForward: MicroBatching;
}

/** (N, R) tensors of the whole batch on the device: what the phases write and the updates gather from. */
export interface ExperienceTensors {
  scores: Tensor<'f32'>;
  rewards: Tensor<'f32'>;
  mask: Tensor<'f32'>;
  old: Tensor<'f32'>;
  ref: Tensor<'f32'>;
  values: Tensor<'f32'>;
  advantages: Tensor<'f32'>;
  /** rollout_is's importance weights, when the experience has them (Experience.rolloutIsWeights). */
  rolloutIsWeights: Tensor<'f32'>;
  returns: Tensor<'f32'>;
  /** Σ_v π_v² per response token (calculate_sum_pi_squared only; null otherwise, no buffer). */
  sumPiSquared: Tensor<'f32'> | null;
  /** The teachers' log-probs of the sampled tokens (on-policy distillation's sampled-token modes only; null
   *  otherwise, no buffer). */
  teacher: Tensor<'f32'> | null;
  /** forward_kl_topk: the teachers' K most likely tokens at each response position and their log-probs (N, R, K). */
  teacherTopk: { K: number; ids: Tensor<'u32'>; logProbs: Tensor<'f32'> } | null;
  /** (N) each row's KL; (4) and (2N) the advantage estimators' statistics. */
  rowKl: Tensor<'f32'>;
  stats: Tensor<'f32'>;
  rowStats: Tensor<'f32'>;
}

/** What the phases have produced so far: host copies and the device tensors. */
interface ExperienceSoFar {
  rollout: RolloutBatch;
  N: number;
  S: number;
  R: number;
  /** (N) the reward of each response before masking. */
  scores: number[];
  /** (N, R) host copies, row-major. */
  responseMask: Float32Array;
  oldLogProbs: Float32Array;
  /** (N, R) the sampler's own log-probs when the training forward recomputed oldLogProbs (calculate_log_probs). */
  rolloutLogProbs: Float32Array | null;
  /** (N, R) Σπ² of the old-log-prob forward (calculate_sum_pi_squared). */
  sumPiSquared: Float32Array | null;
  refLogProbs: Float32Array | null;
  values: Float32Array | null;
  /** Whether tensors.teacher holds this batch's teacher log-probs (distillation; they stay on the device). */
  hasTeacherLogProbs: boolean;
  metrics: Record<string, number>;
  tensors: ExperienceTensors;
}

export interface Experience extends ExperienceSoFar {
  tokenLevelRewards: Float32Array;
  advantages: Float32Array;
  returns: Float32Array;
  /** (N, R) algorithm.rollout_correction.rollout_is's weights, also in tensors.rolloutIsWeights: the optimal token
   *  baselines read them and the actor's policy loss multiplies them in; null without rollout_is. */
  rolloutIsWeights: Float32Array | null;
}

/** A batch between phases: the host copies so far and the (N, R) tensors the next phases read. */
export interface ExperienceBatch extends ExperienceSoFar {
  /** The token rewards: the masked scores, or scores − β·KL once the KL is in the reward. */
  rewards: Tensor<'f32'>;
  /** Whether tensors.ref and tensors.values hold this batch's reference log-probs and values (their host copies
   *  come with the advantages). */
  hasRefLogProbs: boolean;
  hasValues: boolean;
}

/** The (N, R) tensors the host gets a copy of, in one read-back: token rewards, advantages, returns, and values
 *  and reference log-probs where computed. */
const HOST_COPIES = 5;

function flattenRows(rows: readonly ArrayLike<number>[], R: number): Float32Array {
  const out = new Float32Array(rows.length * R);
  rows.forEach((row, b) => out.set(Array.from(row).slice(0, R), b * R));
  return out;
}

export class ExperienceMaker {
  private readonly pool: SequenceBufferPool;
  /** forward_kl_topk: the teachers' top-k at every position of a micro-batch, before its response positions are
   *  kept. */
  private readonly topkScratch: GrowingBuffers;
  private scratch: {
    N: number;
    R: number;
    tensors: ExperienceTensors;
    hostCopies: Tensor<'f32'>;
    rowIndex: Tensor<'u32'>;
  } | null = null;

  constructor(
    private readonly engine: Engine,
    private readonly reference: CausalLm | null,
    private readonly critic: ValueModel | null,
    vocabSize: number,
    /** calculate_sum_pi_squared: keep an (N, R) tensor for Σπ². */
    private readonly withSumPiSquared = false,
    /** On-policy distillation: the frozen teachers (distillation.teacher_models, in plan order); none: off. */
    private readonly teachers: readonly CausalLm[] = [],
    /** forward_kl_topk: the teachers' top-k per position (distillation_loss.topk); null: the sampled token's. */
    private readonly teacherTopk: number | null = null,
  ) {
    this.pool = new SequenceBufferPool(engine, vocabSize);
    this.topkScratch = new GrowingBuffers(engine, 'experience.teacherTopk');
  }

  /** (N, R) tensors of the whole batch, reused while the shape stays, the (HOST_COPIES, N, R) staging tensor the
   *  host copies come back through, and (N) row indices for resample. */
  private batchTensors(
    N: number,
    R: number,
  ): { tensors: ExperienceTensors; hostCopies: Tensor<'f32'>; rowIndex: Tensor<'u32'> } {
    if (this.scratch?.N === N && this.scratch.R === R) return this.scratch;
    if (this.scratch)
      for (const value of [...Object.values(this.scratch.tensors), this.scratch.hostCopies, this.scratch.rowIndex])
        for (const tensor of value && 'K' in value ? [value.ids, value.logProbs] : [value])
          if (tensor) this.engine.destroyTensor(tensor);
    const e = this.engine;
    const t = (name: string, shape: number[]) => e.tensor(`experience.${name}`, shape);
    const tensors: ExperienceTensors = {
      scores: t('scores', [N, R]),
      rewards: t('rewards', [N, R]),
      mask: t('mask', [N, R]),
      old: t('old', [N, R]),
      ref: t('ref', [N, R]),
      values: t('values', [N, R]),
      advantages: t('advantages', [N, R]),
      rolloutIsWeights: t('rolloutIsWeights', [N, R]),
      returns: t('returns', [N, R]),
      sumPiSquared: this.withSumPiSquared ? t('sumPiSquared', [N, R]) : null,
      teacher: this.teachers.length > 0 && this.teacherTopk === null ? t('teacher', [N, R]) : null,
      teacherTopk:
        this.teachers.length > 0 && this.teacherTopk !== null
          ? {
              K: this.teacherTopk,
              ids: e.tensor('experience.teacherTopIds', [N, R, this.teacherTopk], 'u32'),
              logProbs: t('teacherTopLogProbs', [N, R, this.teacherTopk]),
            }
          : null,
      rowKl: t('rowKl', [N]),
      stats: t('stats', [4]),
      rowStats: t('rowStats', [2 * N]),
    };
    this.scratch = {
      N,
      R,
      tensors,
      hostCopies: t('hostCopies', [HOST_COPIES, N, R]),
      rowIndex: e.tensor('experience.rowIndex', [N], 'u32'),
    };
    return this.scratch;
  }

  /** Runs a model over the experience's sequences in micro-batches, gathering each of its per-position outputs,
   *  response-aligned, into the matching one of `targets` (N, R) on the GPU (zero past each micro-batch's window).
   *  `rowGroups` (default: all rows, one group) split the rows between models: `run` gets the group's index. */
  private responseAligned(
    rollout: RolloutBatch,
    split: MicroBatching,
    targets: readonly Tensor<'f32'>[],
    run: (buffers: SequenceBuffers, group: number) => readonly Tensor[],
    rowGroups: readonly (readonly number[])[] = [Array.from({ length: rollout.inputIds.length }, (_, i) => i)],
  ): void {
    const R = rollout.responseLength;
    for (const target of targets) this.engine.clear(target);
    const plans = rowGroups.flatMap((rows, group) =>
      rows.length === 0 ? [] : planMicroBatches(rows, rollout, split).map((plan) => ({ plan, group })),
    );
    for (const { plan, group } of plans) {
      const window = plan.promptLength + plan.responseLength;
      const buffers = this.pool.get(plan.rows.length, window, plan.responseLength);
      buffers.uploadSequences(rollout, plan.rows);
      const outputs = run(buffers, group);
      targets.forEach((target, k) => {
        gatherResponseValuesGpu(
          this.engine,
          outputs[k],
          buffers.logProbs,
          plan.rows.length,
          window,
          plan.responseLength,
        );
        // Copies, not a gather into views: rows need not start at a storage-binding alignment, nor be adjacent.
        const Rb = plan.responseLength;
        plan.rows.forEach((row, b) =>
          this.engine.copy(
            buffers.logProbs.view(`${buffers.logProbs.name}[${b}]`, b * Rb, [Rb]),
            target.view(`${target.name}[${row}]`, row * R, [Rb]),
          ),
        );
      });
    }
  }

  /** Scores sit on each response's last generated token; masked trajectories keep their shape with zeros. */
  begin(rollout: RolloutBatch, scores: number[], mask: RewardMask): ExperienceBatch {
    const N = rollout.inputIds.length;
    const S = rollout.inputIds[0].length;
    const R = rollout.responseLength;
    const responseMask = flattenRows(rollout.responseMask, R);
    const oldLogProbs = flattenRows(rollout.oldLogProbs, R);
    const tokenScores = new Float32Array(N * R);
    rollout.responseMask.forEach((row, b) => {
      const last = Array.from(row).lastIndexOf(1);
      if (last >= 0) tokenScores[b * R + last] = scores[b] * mask.keep[b];
    });
    const { tensors } = this.batchTensors(N, R);
    this.engine.upload(tensors.scores, tokenScores);
    this.engine.upload(tensors.mask, responseMask);
    this.engine.upload(tensors.old, oldLogProbs);
    return {
      rollout,
      N,
      S,
      R,
      scores,
      responseMask,
      oldLogProbs,
      rolloutLogProbs: null,
      sumPiSquared: null,
      refLogProbs: null,
      values: null,
      rewards: tensors.scores,
      tensors,
      hasRefLogProbs: false,
      hasValues: false,
      hasTeacherLogProbs: false,
      metrics: { ...mask.metrics },
    };
  }

  /** calculate_log_probs or calculate_sum_pi_squared (verl's old_log_prob phase): the actor's teacher-forced
   *  log-probs of the sampled tokens replace the sampler's as old log-probs, which stay as rollout log-probs;
   *  rollout_corr/* measures their drift. With calculate_sum_pi_squared the same forward gives Σπ² per token. */
  async recomputeOldLogProbs(x: ExperienceBatch, plan: ExperiencePlan, actor: CausalLm): Promise<void> {
    if (!plan.calculateLogProbs && !plan.calculateSumPiSquared) return;
    const sumPiSquared = plan.calculateSumPiSquared ? x.tensors.sumPiSquared : null;
    if (plan.calculateSumPiSquared && !sumPiSquared)
      throw new Error(
        'ExperienceMaker: calculate_sum_pi_squared needs an ExperienceMaker made with Σπ² (withSumPiSquared)',
      );
    x.rolloutLogProbs = x.oldLogProbs;
    this.responseAligned(
      x.rollout,
      plan.oldForward,
      sumPiSquared ? [x.tensors.old, sumPiSquared] : [x.tensors.old],
      (buffers) => {
        const out = actor.tokenLogprobs(buffers.batch!, buffers.targets, {
          temperature: plan.temperature,
          saveForBackward: false,
          sumPiSquared: sumPiSquared !== null,
        });
        return sumPiSquared ? [out.logprobs, out.sumPiSquared!] : [out.logprobs];
      },
    );
    const [old, sumPiSquaredHost] = await this.hostCopies(x, [x.tensors.old, sumPiSquared]);
    x.oldLogProbs = old!;
    x.sumPiSquared = sumPiSquaredHost;
    Object.assign(x.metrics, rolloutMismatchMetrics(x.oldLogProbs, x.rolloutLogProbs, x.responseMask, x.N, x.R));
  }

  /** The frozen reference policy's log-probs of the sampled tokens (for the KL in the reward or the KL loss). */
  async referenceLogProbs(x: ExperienceBatch, plan: ExperiencePlan): Promise<void> {
    if (!this.reference) return;
    const reference = this.reference;
    this.responseAligned(x.rollout, plan.refForward, [x.tensors.ref], (buffers) => {
      return [
        reference.tokenLogprobs(buffers.batch!, buffers.targets, {
          temperature: plan.temperature,
          saveForBackward: false,
        }).logprobs,
      ];
    });
    x.hasRefLogProbs = true;
  }

  /** On-policy distillation: each frozen teacher's log-probs of the sampled tokens of the rows routed to it
   *  (`teacherOfRow`, verl's teacher_key routing), or with forward_kl_topk its top-k tokens and log-probs at each
   *  response position; at temperature 1 as verl's teacher servers score prompt_logprobs whatever the rollout's;
   *  micro-batched as the reference. */
  async teacherLogProbs(x: ExperienceBatch, plan: ExperiencePlan, teacherOfRow: readonly number[]): Promise<void> {
    const groups = this.teachers.map((_, k) => teacherOfRow.flatMap((teacher, row) => (teacher === k ? [row] : [])));
    const topk = x.tensors.teacherTopk;
    if (topk) this.teacherTopkRows(x.rollout, plan.refForward, topk, groups);
    else {
      const target = x.tensors.teacher;
      if (!target) throw new Error('ExperienceMaker: teacher log-probs need an ExperienceMaker made with teachers');
      this.responseAligned(
        x.rollout,
        plan.refForward,
        [target],
        (buffers, k) => [
          this.teachers[k].tokenLogprobs(buffers.batch!, buffers.targets, { temperature: 1, saveForBackward: false })
            .logprobs,
        ],
        groups,
      );
    }
    x.hasTeacherLogProbs = true;
  }

  /** forward_kl_topk: each teacher's top-k at every position of its rows' micro-batches (the decode top-logprobs
   *  kernel over chunks of its logits, CausalLm.topLogprobs), the response positions copied into (N, R, K). */
  private teacherTopkRows(
    rollout: RolloutBatch,
    split: MicroBatching,
    topk: NonNullable<ExperienceTensors['teacherTopk']>,
    groups: readonly (readonly number[])[],
  ): void {
    const R = rollout.responseLength;
    const { K } = topk;
    this.engine.clear(topk.logProbs);
    groups.forEach((rows, k) => {
      if (rows.length === 0) return;
      const teacher = this.teachers[k];
      for (const plan of planMicroBatches(rows, rollout, split)) {
        const S = plan.promptLength + plan.responseLength;
        const Rb = plan.responseLength;
        const m = plan.rows.length;
        const buffers = this.pool.get(m, S, Rb);
        buffers.uploadSequences(rollout, plan.rows);
        const ids = this.topkScratch.get('ids', [m * S, K], 'u32');
        const logProbs = this.topkScratch.get('logProbs', [m * S, K]);
        // Logits of up to 2^22 floats (16 MiB) at a time.
        teacher.topLogprobs(buffers.batch!, K, ids, logProbs, Math.floor(2 ** 22 / teacher.config.vocabSize));
        // Response token t of row b is predicted at position b·S + S − Rb − 1 + t: Rb·K values from there.
        plan.rows.forEach((row, b) => {
          const from = (b * S + S - Rb - 1) * K;
          for (const [source, target] of [
            [ids, topk.ids],
            [logProbs, topk.logProbs],
          ] as const)
            this.engine.copy(
              source.view(`${source.name}[${b}]`, from, [Rb * K]),
              target.view(`${target.name}[${row}]`, row * R * K, [Rb * K]),
            );
        });
      }
    });
  }

  /** The critic's value of each response token (GAE's baseline). */
  async values(x: ExperienceBatch, plan: ExperiencePlan): Promise<void> {
    if (!this.critic) return;
    const critic = this.critic;
    this.responseAligned(x.rollout, plan.valueForward, [x.tensors.values], (buffers) => {
      return [critic.tokenValues(buffers.batch!, { saveForBackward: false })];
    });
    x.hasValues = true;
  }

  /** algorithm.use_kl_in_reward: token rewards = scores − β·KL, and the KL controller sees this batch's KL. */
  async klInReward(x: ExperienceBatch, plan: ExperiencePlan, klCtrl: KLController): Promise<void> {
    if (!plan.useKlInReward) return;
    if (!x.hasRefLogProbs) throw new Error('algorithm.use_kl_in_reward needs the reference model');
    const t = x.tensors;
    Object.assign(
      x.metrics,
      await applyKlInRewardGpu(this.engine, {
        tokenLevelScores: t.scores,
        oldLogProbs: t.old,
        refLogProb: t.ref,
        responseMask: t.mask,
        tokenLevelRewards: t.rewards,
        rowKl: t.rowKl,
        klCtrl,
        klPenalty: plan.klPenalty,
        B: x.N,
        T: x.R,
      }),
    );
    x.rewards = t.rewards;
  }

  /** Rollout correction's rejection sampling (after the KL in the reward, before advantages, as verl): the rejected
   *  tokens leave the response mask the advantages and both updates read. */
  rejectTokens(x: ExperienceBatch, responseMask: Float32Array, metrics: Record<string, number>): void {
    x.responseMask = responseMask;
    this.engine.upload(x.tensors.mask, responseMask);
    Object.assign(x.metrics, metrics);
  }

  /** algorithm.adv_estimator's advantages and returns; `baselineScores`: ReMax's greedy score per sample;
   *  `rolloutIsWeights` (N, R): rollout_is's weights, uploaded once for the optimal token baselines (which read them
   *  as verl's do) and the actor update; `rewardExtraInfo`: each sample's reward result beside its number, where
   *  GDPO reads its reward keys. */
  async advantages(
    x: ExperienceBatch,
    plan: ExperiencePlan,
    baselineScores: number[] | null,
    rolloutIsWeights: Float32Array | null = null,
    rewardExtraInfo: readonly (Readonly<Record<string, unknown>> | null)[] = [],
  ): Promise<Experience> {
    const e = this.engine;
    const t = x.tensors;
    const gdpo = plan.advEstimator === 'gdpo' && plan.gdpo ? gdpoRewardKeyScores(plan.gdpo, rewardExtraInfo) : null;
    if (gdpo) Object.assign(x.metrics, gdpo.metrics);
    const baselines = baselineScores ? e.tensorFrom('experience.remaxBaselines', [x.N], baselineScores) : null;
    const otb = SUM_PI_SQUARED_ESTIMATORS.includes(plan.advEstimator);
    if (rolloutIsWeights) e.upload(t.rolloutIsWeights, rolloutIsWeights);
    computeAdvantagesGpu(e, plan.advEstimator, {
      tokenLevelRewards: x.rewards,
      responseMask: t.mask,
      responseMaskHost: x.responseMask,
      advantages: t.advantages,
      returns: t.returns,
      values: x.hasValues ? t.values : null,
      rewardBaselines: baselines,
      index: x.rollout.groupIds,
      stats: t.stats,
      rowStats: t.rowStats,
      oldLogProbs: t.old,
      sumPiSquared: x.sumPiSquared ? t.sumPiSquared : null,
      rolloutIsWeights: otb && rolloutIsWeights ? t.rolloutIsWeights : null,
      // verl's compute_advantage leaves each estimator its own default epsilon: 1e-8 for the optimal token baselines.
      gamma: plan.gamma,
      lam: plan.lam,
      normAdvByStd: plan.normAdvByStdInGrpo,
      epsilon: otb ? 1e-8 : 1e-6,
      rewardKeyScores: gdpo,
      B: x.N,
      T: x.R,
    });
    if (baselines) e.destroyTensor(baselines);
    const [tokenLevelRewards, advantages, returns, values, refLogProbs] = await this.hostCopies(x, [
      x.rewards,
      t.advantages,
      t.returns,
      x.hasValues ? t.values : null,
      x.hasRefLogProbs ? t.ref : null,
    ]);
    const { rollout, N, S, R, scores, responseMask, oldLogProbs, rolloutLogProbs, sumPiSquared, metrics, tensors } = x;
    const { hasTeacherLogProbs } = x;
    return {
      rollout,
      N,
      S,
      R,
      scores,
      responseMask,
      oldLogProbs,
      rolloutLogProbs,
      sumPiSquared,
      refLogProbs,
      values,
      tokenLevelRewards: tokenLevelRewards!,
      advantages: advantages!,
      returns: returns!,
      rolloutIsWeights,
      hasTeacherLogProbs,
      metrics,
      tensors,
    };
  }

  /** Host copies of (N, R) tensors (null: none) through one read-back: each is copied into its slot of the staging
   *  tensor on the device, then the used slots come back together. */
  private async hostCopies(
    x: ExperienceBatch,
    sources: readonly (Tensor<'f32'> | null)[],
  ): Promise<(Float32Array | null)[]> {
    const staging = this.batchTensors(x.N, x.R).hostCopies;
    const size = x.N * x.R;
    const slots = sources.map((source, i) => (source ? i : -1));
    const used = Math.max(...slots) + 1;
    sources.forEach(
      (source, i) => source && this.engine.copy(source, staging.view(`${staging.name}[${i}]`, i * size, [size])),
    );
    const values = await this.engine.read(staging.view(staging.name, 0, [used * size]));
    return slots.map((slot) => (slot < 0 ? null : values.slice(slot * size, (slot + 1) * size)));
  }

  /**
   * The batch's rows `indices` (N of them, repeats allowed: PF-PPO's resampling), as verl indexes every tensor of the
   * batch. Each (N, R) tensor holding this batch's data is gathered on the device (kernels/util/gather-rows, the
   * micro-batches' gather) into the staging tensor, idle between read-backs, and copied back in place; the host
   * copies and the rollout's token rows are picked on the host, where they already are. One upload (the N indices),
   * no read-back. Left out: rowKl, stats and rowStats, which the KL controller and the estimators have already
   * consumed.
   */
  resample(x: Experience, indices: readonly number[]): Experience {
    const { N, R, tensors: t } = x;
    if (indices.length !== N || !indices.every((i) => Number.isInteger(i) && i >= 0 && i < N)) {
      throw new Error(`ExperienceMaker.resample: expected ${N} row indices in [0, ${N}), got ${indices.length}`);
    }
    const { hostCopies, rowIndex } = this.batchTensors(N, R);
    const scratch = hostCopies.view(`${hostCopies.name}[0]`, 0, [N * R]);
    this.engine.upload(rowIndex, indices);
    for (const tensor of [
      t.scores,
      t.rewards,
      t.mask,
      t.old,
      x.refLogProbs && t.ref,
      x.values && t.values,
      t.advantages,
      t.returns,
      x.sumPiSquared && t.sumPiSquared,
      x.rolloutIsWeights && t.rolloutIsWeights,
      x.hasTeacherLogProbs && t.teacher,
    ]) {
      if (!tensor) continue;
      gatherRows(this.engine, { source: tensor, sourceStride: R, rows: rowIndex, m: N, width: R, out: scratch });
      this.engine.copy(scratch, tensor);
    }
    const pick = (all: Float32Array) => responseRows(all, R, indices);
    return {
      ...x,
      rollout: rolloutRows(x.rollout, indices),
      scores: indices.map((i) => x.scores[i]),
      responseMask: pick(x.responseMask),
      oldLogProbs: pick(x.oldLogProbs),
      rolloutLogProbs: x.rolloutLogProbs && pick(x.rolloutLogProbs),
      sumPiSquared: x.sumPiSquared && pick(x.sumPiSquared),
      refLogProbs: x.refLogProbs && pick(x.refLogProbs),
      values: x.values && pick(x.values),
      tokenLevelRewards: pick(x.tokenLevelRewards),
      advantages: pick(x.advantages),
      returns: pick(x.returns),
      rolloutIsWeights: x.rolloutIsWeights && pick(x.rolloutIsWeights),
      metrics: { ...x.metrics },
    };
  }
}
