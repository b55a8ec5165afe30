// PF-PPO's resampled batch (algorithm.use_pf_ppo): ExperienceMaker.resample gathers the rows of the experience's
// device tensors on the device and picks their host copies and token rows on the host, and both must be the
// original rows at the drawn indices; in whole runs of the tiny model the trainer resamples GAE's batch (never
// another estimator's), trains on it and logs finite metrics of it.
import { describe, it, expect, vi } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { raggedRolloutBatch } from '../support/ragged-rollout.ts';
import { Rng } from '../../engine/rng.ts';
import { parseHfConfig, withHead } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { ValueModel } from '../../models/value-model.ts';
import { ExperienceMaker, type Experience } from '../../ppo/phases/experience.ts';
import { sampleRewardMask } from '../../ppo/algorithm/reward-mask.ts';
import { FixedKLController } from '../../ppo/algorithm/kl-controller.ts';
import type { RolloutBatch } from '../../ppo/generation/types.ts';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

const CONFIG = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 29,
  hidden_size: 16,
  intermediate_size: 32,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: true,
});
const P = 4;
const R = 5;
const PROMPT_LENGTHS = [4, 2, 3, 1, 4, 2];
const RESPONSE_LENGTHS = [5, 1, 3, 4, 2, 5];
const N = PROMPT_LENGTHS.length;
/** Drawn rows, with repeats and rows left out, in an order that is not sorted. */
const INDICES = [3, 3, 0, 5, 1, 3];

function rolloutBatch(): RolloutBatch {
  return raggedRolloutBatch({
    promptLengths: PROMPT_LENGTHS,
    responseLengths: RESPONSE_LENGTHS,
    P,
    R,
    vocabSize: CONFIG.vocabSize,
    seed: 11,
    randomOldLogProbs: true,
  });
}

/**
 * GAE experience of the rollout with a reference (KL in the reward, so token rewards differ from scores) and a critic.
 */
async function gaeExperience(): Promise<{ maker: ExperienceMaker; x: Experience }> {
  const engine = await gpuEngine();
  const arena = (config: typeof CONFIG, label: string) => {
    const params = createParameterArena(engine, config, label);
    uploadArenaTensors(engine, params, initialParameters(config, 9, 0.3));
    return params;
  };
  const criticConfig = withHead(CONFIG, 'token-classification');
  const maker = new ExperienceMaker(
    engine,
    new CausalLm(engine, CONFIG, arena(CONFIG, 'pf-reference')),
    new ValueModel(engine, criticConfig, arena(criticConfig, 'pf-critic')),
    CONFIG.vocabSize,
  );
  const all = { microBatchSize: null };
  const plan = {
    advEstimator: 'gae',
    gamma: 1,
    lam: 0.95,
    normAdvByStdInGrpo: true,
    useKlInReward: true,
    klPenalty: 'kl',
    temperature: 1,
    calculateLogProbs: false,
    calculateSumPiSquared: false,
    oldForward: all,
    refForward: all,
    valueForward: all,
  };
  const batch = maker.begin(rolloutBatch(), [1, -0.5, 0, 2, 0.25, -1], sampleRewardMask(new Rng(1), N, 0));
  await maker.referenceLogProbs(batch, plan);
  await maker.values(batch, plan);
  await maker.klInReward(batch, plan, new FixedKLController(0.1));
  return { maker, x: await maker.advantages(batch, plan, null) };
}

/** Rows `indices` of an (N, R) array. */
const rowsOf = (all: ArrayLike<number>, indices: readonly number[]) =>
  indices.flatMap((i) => Array.from(all).slice(i * R, (i + 1) * R));

describe('ExperienceMaker.resample', () => {
  it(
    'gathers every per-token tensor on the device to the rows its host copies pick: the original rows at the drawn ' +
      'indices',
    async () => {
      const engine = await gpuEngine();
      const { maker, x } = await gaeExperience();
      const t = x.tensors;
      const device = {
        scores: t.scores,
        rewards: t.rewards,
        mask: t.mask,
        old: t.old,
        ref: t.ref,
        values: t.values,
        advantages: t.advantages,
        returns: t.returns,
      };
      const before: Record<string, Float32Array> = {};
      for (const [name, tensor] of Object.entries(device)) before[name] = (await engine.read(tensor)) as Float32Array;
      expect(rowsOf(before.rewards, [0, 1, 2, 3, 4, 5])).not.toEqual(rowsOf(before.scores, [0, 1, 2, 3, 4, 5]));
      const readbacks = engine.transfers.readbacks;
      const uploads = engine.transfers.uploads;
      const y = maker.resample(x, INDICES);
      // One upload (the indices), no read-back.
      expect(engine.transfers.uploads - uploads).toBe(1);
      expect(engine.transfers.readbacks - readbacks).toBe(0);
      for (const [name, tensor] of Object.entries(device))
        expect(Array.from((await engine.read(tensor)) as Float32Array), name).toEqual(rowsOf(before[name], INDICES));
      // The host copies are those rows too, and equal what the device now holds: the updates read the same batch either
      // way.
      const host: [string, Float32Array, Float32Array][] = [
        ['mask', x.responseMask, y.responseMask],
        ['old', x.oldLogProbs, y.oldLogProbs],
        ['ref', x.refLogProbs!, y.refLogProbs!],
        ['values', x.values!, y.values!],
        ['advantages', x.advantages, y.advantages],
        ['returns', x.returns, y.returns],
        ['rewards', x.tokenLevelRewards, y.tokenLevelRewards],
      ];
      for (const [name, original, resampled] of host) {
        expect(Array.from(resampled), name).toEqual(rowsOf(original, INDICES));
        expect(Array.from(resampled), `${name} on the device`).toEqual(rowsOf(before[name], INDICES));
      }
      expect(y.scores).toEqual(INDICES.map((i) => x.scores[i]));
      for (const key of [
        'groupIds',
        'inputIds',
        'attentionMask',
        'positionIds',
        'responseMask',
        'responseLengths',
        'finishReasons',
      ] as const) {
        expect(y.rollout[key], key).toEqual(INDICES.map((i) => x.rollout[key][i]));
      }
      expect(() => maker.resample(x, [0, 1])).toThrow(`expected ${N} row indices in [0, ${N})`);
    },
  );
});

/** Two steps of the tiny model with PF-PPO, recording each resample (its input, the drawn indices, its output). */
async function pfPpoRun(extra: string[]) {
  const { root, overrides } = await makeTinyRun();
  // Scores that differ between responses, so the weights have something to tell apart.
  const reward = join(root, 'length-reward.mjs');
  await writeFile(reward, 'export function compute_score(source, text) { return (text.length % 3) - 0.5; }\n');
  const dir = join(root, 'run');
  const original = ExperienceMaker.prototype.resample;
  const calls: { x: Experience; indices: number[]; y: Experience }[] = [];
  const spy = vi.spyOn(ExperienceMaker.prototype, 'resample').mockImplementation(function (
    this: ExperienceMaker,
    x,
    indices,
  ) {
    const y = original.call(this, x, indices);
    calls.push({ x, indices: [...indices], y });
    return y;
  });
  try {
    expect(
      await main([
        ...overrides,
        `custom_reward_function.path=${reward}`,
        'data.max_response_length=5',
        'actor_rollout_ref.rollout.n=2',
        'algorithm.use_pf_ppo=true',
        ...extra,
        'trainer.total_training_steps=2',
        `trainer.default_local_dir=${dir}`,
      ]),
    ).toBe(0);
  } finally {
    spy.mockRestore();
  }
  const steps = (await runMetrics(dir)).map((l) => l.data).filter((m) => m['critic/score/mean'] !== undefined);
  return { steps, calls };
}

describe('PF-PPO in a run', () => {
  it('GAE with max_min: trains on the highest- and lowest-scored rows, resampled consistently, with finite metrics ' +
    'of that batch', async () => {
    const { steps, calls } = await pfPpoRun([
      'algorithm.pf_ppo.reweight_method=max_min',
      'actor_rollout_ref.actor.use_kl_loss=true',
      'actor_rollout_ref.rollout.calculate_log_probs=true',
      'algorithm.rollout_correction.rollout_is=token',
    ]);
    expect(steps).toHaveLength(2);
    expect(calls).toHaveLength(2);
    for (const [s, step] of steps.entries()) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      const { x, indices, y } = calls[s];
      const max = Math.max(...x.scores);
      const min = Math.min(...x.scores);
      // Every other row weighs 1e-8 against at least 1.
      for (const i of indices) expect([max, min]).toContain(x.scores[i]);
      expect(step['pf_ppo/distinct_rows']).toBe(new Set(indices).size);
      for (const key of [
        'advantages',
        'returns',
        'oldLogProbs',
        'rolloutLogProbs',
        'refLogProbs',
        'values',
        'responseMask',
      ] as const) {
        expect(Array.from(y[key]!), key).toEqual(rowsOf(x[key]!, indices));
      }
      expect(y.rollout.inputIds).toEqual(indices.map((i) => x.rollout.inputIds[i]));
      // The data metrics describe the resampled batch, as verl computes them after compute_advantage.
      expect(step['critic/score/mean']).toBeCloseTo(
        indices.reduce((sum, i) => sum + x.scores[i], 0) / indices.length,
        6,
      );
      expect(step['actor/pg_loss']).toBeDefined();
      expect(step['critic/vf_loss']).toBeDefined();
    }
  }, 300_000);

  it('is ignored with another estimator, as verl: nothing resampled, no pf_ppo/* metric', async () => {
    const { steps, calls } = await pfPpoRun(['algorithm.adv_estimator=grpo']);
    expect(steps).toHaveLength(2);
    expect(calls).toHaveLength(0);
    for (const step of steps) expect(Object.keys(step).filter((k) => k.startsWith('pf_ppo/'))).toEqual([]);
  }, 300_000);
});
