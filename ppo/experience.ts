// Turns a rollout into PPO experience, verl's order: scores (rule or model reward) → reward mask → reference
// log-probs → critic values → token rewards (score at the last response token, minus β·KL when the KL is in
// the reward) → advantages and returns. Forwards run in micro-batches of sequences on the GPU; the per-token tensors
// the updates need come back to the host once, so mini-batches can be shuffled and sliced freely.
import type { Engine, Tensor } from '../engine/index.ts';
import type { Rng } from '../engine/rng.ts';
import type { CausalLm } from '../models/causal-lm.ts';
import type { ValueModel } from '../models/value-model.ts';
import type { RolloutBatch } from './rollout.ts';
import { SequenceBufferPool, type SequenceBuffers } from './sequence-buffers.ts';
import { planMicroBatches, type MicroBatching } from './mini-batches.ts';
import { gatherResponseValuesGpu } from '../kernels/response-values.ts';
import { applyKlPenaltyGpu } from '../kernels/kl-penalty.ts';
import { computeGaeAdvantageReturnGpu } from '../kernels/gae.ts';
import { computeOutcomeAdvantageGpu, groupLayout, groupTensors } from '../kernels/advantage-outcome.ts';
import { computeReinforcePlusPlusOutcomeAdvantageGpu, computeRemaxOutcomeAdvantageGpu } from '../kernels/reverse-returns.ts';
import { sampleRewardMask } from './reward-mask.ts';
import type { KLController } from './kl-controller.ts';

export interface ExperienceConfig {
  advEstimator: string;
  gamma: number;
  lam: number;
  normAdvByStdInGrpo: boolean;
  useKlInReward: boolean;
  klPenalty: string;
  rewardMaskRatio: number;
  temperature: number;
  /** Sequences (or tokens) per forward of the reference and of the critic. */
  refForward: MicroBatching;
  valueForward: MicroBatching;
}

export interface Experience {
  rollout: RolloutBatch;
  N: number;
  S: number;
  R: number;
  /** (N) the reward of each response before masking. */
  scores: number[];
  /** (N, R) host copies, row-major. */
  responseMask: Float32Array;
  oldLogProbs: Float32Array;
  refLogProbs: Float32Array | null;
  values: Float32Array | null;
  tokenLevelRewards: Float32Array;
  advantages: Float32Array;
  returns: Float32Array;
  metrics: Record<string, number>;
}

function flattenRows(rows: readonly ArrayLike<number>[], R: number): Float32Array {
  const out = new Float32Array(rows.length * R);
  rows.forEach((row, b) => out.set(Array.from(row).slice(0, R), b * R));
  return out;
}

export class ExperienceMaker {
  private readonly pool: SequenceBufferPool;
  private scratch: { N: number; R: number; tensors: Record<string, Tensor<'f32'>> } | null = null;

  constructor(
    private readonly engine: Engine,
    private readonly reference: CausalLm | null,
    private readonly critic: ValueModel | null,
    vocabSize: number,
  ) {
    this.pool = new SequenceBufferPool(engine, vocabSize);
  }

  /** (N, R) tensors of the whole batch, reused while the shape stays. */
  private batchTensors(N: number, R: number): Record<string, Tensor<'f32'>> {
    if (this.scratch?.N === N && this.scratch.R === R) return this.scratch.tensors;
    const e = this.engine;
    const t = (name: string, shape: number[]) => e.tensor(`experience.${name}`, shape);
    const tensors = {
      scores: t('scores', [N, R]), rewards: t('rewards', [N, R]), mask: t('mask', [N, R]), old: t('old', [N, R]), ref: t('ref', [N, R]),
      values: t('values', [N, R]), advantages: t('advantages', [N, R]), returns: t('returns', [N, R]), rowKl: t('rowKl', [N]),
      stats: t('stats', [4]), rowStats: t('rowStats', [2 * N]),
    };
    this.scratch = { N, R, tensors };
    return tensors;
  }

  /** Runs `model` over the experience's sequences in micro-batches; returns its (N, R) response-aligned output. */
  private async responseAligned(rollout: RolloutBatch, split: MicroBatching, run: (buffers: SequenceBuffers) => Tensor): Promise<Float32Array> {
    const N = rollout.inputIds.length;
    const R = rollout.responseLength;
    const out = new Float32Array(N * R);
    const all = Array.from({ length: N }, (_, i) => i);
    for (const plan of planMicroBatches(all, rollout, split)) {
      const window = plan.promptLength + plan.responseLength;
      const buffers = this.pool.get(plan.rows.length, window, plan.responseLength);
      buffers.uploadSequences(rollout, plan.rows);
      const perPosition = run(buffers);
      gatherResponseValuesGpu(this.engine, perPosition, buffers.logProbs, plan.rows.length, window, plan.responseLength);
      const values = await this.engine.read(buffers.logProbs);
      plan.rows.forEach((row, b) => out.set(values.subarray(b * plan.responseLength, (b + 1) * plan.responseLength), row * R));
    }
    return out;
  }

  /** `baselineScores`: ReMax's per-sample baseline (the greedy response's score to the same prompt). */
  async make(rollout: RolloutBatch, scores: number[], config: ExperienceConfig, rng: Rng, klCtrl: KLController, baselineScores: number[] | null = null): Promise<Experience> {
    const e = this.engine;
    const N = rollout.inputIds.length;
    const S = rollout.inputIds[0].length;
    const R = rollout.responseLength;
    const metrics: Record<string, number> = {};
    const responseMask = flattenRows(rollout.responseMask, R);
    const oldLogProbs = flattenRows(rollout.oldLogProbs, R);

    // Scores sit on each response's last generated token; masked trajectories keep their shape with zeros.
    const mask = sampleRewardMask(rng, N, config.rewardMaskRatio);
    if (config.rewardMaskRatio > 0) Object.assign(metrics, mask.metrics);
    const tokenScores = new Float32Array(N * R);
    rollout.responseMask.forEach((row, b) => {
      const last = Array.from(row).lastIndexOf(1);
      if (last >= 0) tokenScores[b * R + last] = scores[b] * mask.keep[b];
    });

    const refLogProbs = this.reference
      ? await this.responseAligned(rollout, config.refForward, (buffers) => {
        return this.reference!.tokenLogprobs(buffers.batch!, buffers.targets, { temperature: config.temperature, saveForBackward: false }).logprobs;
      })
      : null;
    const values = this.critic
      ? await this.responseAligned(rollout, config.valueForward, (buffers) => {
        return this.critic!.tokenValues(buffers.batch!, { saveForBackward: false });
      })
      : null;

    const t = this.batchTensors(N, R);
    e.upload(t.scores, tokenScores);
    e.upload(t.mask, responseMask);
    e.upload(t.old, oldLogProbs);
    let rewards = t.scores;
    if (config.useKlInReward) {
      if (!refLogProbs) throw new Error('algorithm.use_kl_in_reward needs the reference model');
      e.upload(t.ref, refLogProbs);
      const beta = klCtrl.value;
      applyKlPenaltyGpu(e, {
        tokenLevelScores: t.scores, oldLogProbs: t.old, refLogProb: t.ref, responseMask: t.mask, tokenLevelRewards: t.rewards,
        rowKl: t.rowKl, beta, klPenalty: config.klPenalty, B: N, T: R,
      });
      rewards = t.rewards;
      const rowKl = await e.read(t.rowKl);
      const currentKl = rowKl.reduce((a, b) => a + b, 0) / N;
      klCtrl.update(currentKl, N);
      metrics['actor/reward_kl_penalty'] = currentKl;
      metrics['actor/reward_kl_penalty_coeff'] = beta;
    }

    if (config.advEstimator === 'gae') {
      if (!values) throw new Error('algorithm.adv_estimator=gae needs a critic');
      e.upload(t.values, values);
      computeGaeAdvantageReturnGpu(e, {
        tokenLevelRewards: rewards, values: t.values, responseMask: t.mask, advantages: t.advantages, returns: t.returns,
        stats: t.stats, gamma: config.gamma, lam: config.lam, B: N, T: R,
      });
    } else if (config.advEstimator === 'reinforce_plus_plus') {
      computeReinforcePlusPlusOutcomeAdvantageGpu(e, {
        tokenLevelRewards: rewards, responseMask: t.mask, advantages: t.advantages, returns: t.returns, stats: t.stats, gamma: config.gamma, B: N, T: R,
      });
    } else if (config.advEstimator === 'remax') {
      if (!baselineScores) throw new Error('algorithm.adv_estimator=remax needs the greedy baseline scores');
      const baselines = e.tensorFrom('experience.remaxBaselines', [N], baselineScores);
      computeRemaxOutcomeAdvantageGpu(e, { tokenLevelRewards: rewards, responseMask: t.mask, advantages: t.advantages, returns: t.returns, rewardBaselines: baselines, B: N, T: R });
      e.destroyTensor(baselines);
    } else {
      const groups = groupTensors(e, groupLayout(rollout.groupIds));
      computeOutcomeAdvantageGpu(e, config.advEstimator as Parameters<typeof computeOutcomeAdvantageGpu>[1], {
        tokenLevelRewards: rewards, responseMask: t.mask, ...groups, rowStats: t.rowStats, stats: t.stats, advantages: t.advantages,
        epsilon: 1e-6, normAdvByStd: config.normAdvByStdInGrpo, B: N, T: R,
      });
      e.copy(t.advantages, t.returns);
      for (const g of Object.values(groups)) e.destroyTensor(g);
    }
    return {
      rollout, N, S, R, scores, responseMask, oldLogProbs, refLogProbs, values,
      tokenLevelRewards: await e.read(rewards),
      advantages: await e.read(t.advantages),
      returns: await e.read(t.returns),
      metrics,
    };
  }
}
