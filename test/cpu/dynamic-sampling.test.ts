// DAPO's dynamic sampling against verl's recipe/dapo/dapo_ray_trainer.py fit(): per prompt uid the metric values,
// np.std of each group, kept = std > 0 or a single sample, kept groups concatenated across generation batches until
// train_batch_size prompts, then batch[:train_batch_size * n]; past max_num_gen_batches, verl's ValueError text.
import { describe, it, expect } from 'vitest';
import { loadConfig } from '../../ppo/config.ts';
import { PromptSampler } from '../../ppo/data/dataset.ts';
import {
  dynamicSample,
  filterMetricValues,
  keptGroups,
  tooManyGenBatchesMessage,
  type ScoredBatch,
} from '../../ppo/algorithm/dynamic-sampling.ts';
import type { RolloutBatch } from '../../ppo/generation/types.ts';

/**
 * A generation batch of `prompts` (prompt g = g+1 tokens of value 10+g), n samples each, response k of sample i = [i],
 * scores given.
 */
function generationBatch(
  prompts: string[],
  n: number,
  scores: number[],
  P: number,
  R: number,
  extra: (Record<string, unknown> | null)[] = scores.map(() => null),
): ScoredBatch<string> {
  const groupIds = prompts.flatMap((_, g) => new Array<number>(n).fill(g));
  const promptRows = groupIds.map((g) => [...new Array<number>(P - 1).fill(0), 10 + g]);
  const responses = groupIds.map((_, i) => [100 + i, ...new Array<number>(R - 1).fill(0)]);
  const rollout: RolloutBatch = {
    groupIds,
    promptLength: P,
    responseLength: R,
    prompts: promptRows,
    responses,
    inputIds: promptRows.map((p, i) => [...p, ...responses[i]]),
    attentionMask: promptRows.map(() => [
      ...new Array<number>(P - 1).fill(0),
      1,
      1,
      ...new Array<number>(R - 1).fill(0),
    ]),
    positionIds: promptRows.map(() => [
      ...new Array<number>(P - 1).fill(1),
      0,
      ...Array.from({ length: R }, (_, t) => 1 + t),
    ]),
    responseMask: responses.map(() => [1, ...new Array<number>(R - 1).fill(0)]),
    oldLogProbs: responses.map((_, i) => Float32Array.from([-i - 1, ...new Array<number>(R - 1).fill(0)])),
    responseLengths: responses.map(() => 1),
    finishReasons: responses.map(() => 'stop'),
  };
  return { records: prompts, rollout, scores, rewardExtraInfo: extra };
}

describe('DAPO dynamic sampling (algorithm.filter_groups)', () => {
  it('keeps the groups whose metric np.std > 0 or that hold one sample, in order of first appearance', () => {
    expect(keptGroups([0, 0, 1, 1, 2, 2], [1, 0, 1, 1, 0, 0])).toEqual([0]);
    expect(keptGroups([0, 1, 1, 2, 2], [5, 0, 0, 0.5, 1])).toEqual([0, 2]);
    // np.std([0.1, 0.1, 0.1]) = 1.3877787807814457e-17 > 0 (the mean rounds to 0.10000000000000002): verl keeps it.
    expect(keptGroups([0, 0, 0, 1, 1, 1], [0.1, 0.1, 0.1, 0.5, 0.5, 0.5])).toEqual([0]);
  });

  it(
    "reads acc from the reward's extra fields, else the score; seq_reward is the score; a missing field names the " +
      'metric',
    () => {
      const extra = [
        { score: 1, acc: true },
        { score: 0.5, acc: false },
      ];
      expect(filterMetricValues('acc', [1.5, 0.5], extra)).toEqual([1, 0]);
      expect(filterMetricValues('acc', [1.5, 0.5], [null, null])).toEqual([1.5, 0.5]);
      expect(filterMetricValues('score', [1.5, 0.5], extra)).toEqual([1, 0.5]);
      expect(filterMetricValues('seq_reward', [1.5, 0.5], extra)).toEqual([1.5, 0.5]);
      expect(() => filterMetricValues('pred_ok', [1], [{ score: 1 }])).toThrow(
        /algorithm\.filter_groups\.metric=pred_ok: the reward of sample 0 returned no field 'pred_ok'/,
      );
    },
  );

  it(
    "accumulates kept groups across generation batches, then takes the first train_batch_size prompts' " + 'groups',
    async () => {
      // gen_batch_size 3, n 2, train_batch_size 3. Batch 1: a uniform (1,1), b varied, c uniform (0,0) → [b].
      // Batch 2 (longer prompts): d varied, e varied, f uniform → [b, d, e]: 3 prompts, done after 2 batches.
      const batches = [
        generationBatch(['a', 'b', 'c'], 2, [1, 1, 0, 1, 0, 0], 2, 3),
        generationBatch(['d', 'e', 'f'], 2, [0, 1, 1, 0, 1, 1], 4, 3),
        generationBatch(['g', 'h', 'i'], 2, [0, 1, 0, 1, 0, 1], 4, 3),
      ];
      let drawn = 0;
      const { batch, numGenBatches } = await dynamicSample(
        { trainBatchSize: 3, maxNumGenBatches: 0, metric: 'acc', padTokenId: 0 },
        async () => batches[drawn++],
      );
      expect(numGenBatches).toBe(2);
      expect(drawn).toBe(2);
      expect(batch.records).toEqual(['b', 'd', 'e']);
      expect(batch.scores).toEqual([0, 1, 0, 1, 1, 0]);
      const r = batch.rollout;
      expect(r.groupIds).toEqual([0, 0, 1, 1, 2, 2]);
      expect(r.promptLength).toBe(4);
      // b's rows (samples 2, 3 of batch 1) left-padded from 2 to 4 prompt tokens; d's and e's as generated.
      expect(r.inputIds.map((row) => row.slice(0, 5))).toEqual([
        [0, 0, 0, 11, 102],
        [0, 0, 0, 11, 103],
        [0, 0, 0, 10, 100],
        [0, 0, 0, 10, 101],
        [0, 0, 0, 11, 102],
        [0, 0, 0, 11, 103],
      ]);
      expect(r.attentionMask[0]).toEqual([0, 0, 0, 1, 1, 0, 0]);
      expect(r.positionIds[0]).toEqual([1, 1, 1, 0, 1, 2, 3]);
      expect(Array.from(r.oldLogProbs[0])).toEqual([-3, 0, 0]);
      expect(r.prompts.every((p) => p.length === 4) && r.responses.every((s) => s.length === 3)).toBe(true);
    },
  );

  it('cuts a batch that overfills at train_batch_size prompts (verl: batch[:train_batch_size * n])', async () => {
    const only = generationBatch(['a', 'b', 'c'], 2, [1, 0, 0, 1, 1, 0], 2, 2);
    const { batch, numGenBatches } = await dynamicSample(
      { trainBatchSize: 2, maxNumGenBatches: 1, metric: 'seq_reward', padTokenId: 0 },
      async () => only,
    );
    expect(numGenBatches).toBe(1);
    expect(batch.records).toEqual(['a', 'b']);
    expect(batch.rollout.groupIds).toEqual([0, 0, 1, 1]);
  });

  it("stops with verl's error once max_num_gen_batches batches did not fill the training batch", async () => {
    const uniform = generationBatch(['a', 'b'], 2, [1, 1, 0, 0], 2, 2);
    await expect(
      dynamicSample({ trainBatchSize: 2, maxNumGenBatches: 3, metric: 'acc', padTokenId: 0 }, async () => uniform),
    ).rejects.toThrow(
      'num_gen_batches=3 >= max_num_gen_batches=3. Generated too many. Please check if your data are too difficult. ' +
        'You could also try set max_num_gen_batches=0 to enable endless trials.',
    );
    expect(tooManyGenBatchesMessage(2, 2)).toMatch(
      /^num_gen_batches=2 >= max_num_gen_batches=2\. Generated too many\./,
    );
  });
});

describe('filter_groups and gen_batch_size config', () => {
  const small = ['data.train_batch_size=4', 'actor_rollout_ref.actor.ppo_mini_batch_size=2'];
  it('defaults as verl: off, no metric, unlimited; gen_batch_size null draws train_batch_size prompts', () => {
    const config = loadConfig({ overrides: small });
    expect(config.algorithm.filter_groups).toEqual({ enable: false, metric: null, max_num_gen_batches: 0 });
    expect(config.data.gen_batch_size).toBeNull();
    expect(PromptSampler.fromConfig(12, config.data).batchAt({ epoch: 0, index: 0 }).indices).toHaveLength(4);
  });

  it("draws data.gen_batch_size prompts per generation batch, and names that key in the sampler's errors", () => {
    const config = loadConfig({
      overrides: [
        ...small,
        'data.gen_batch_size=6',
        'algorithm.filter_groups.enable=true',
        'algorithm.filter_groups.max_num_gen_batches=10',
        'algorithm.filter_groups.metric=score',
      ],
    });
    expect(config.algorithm.filter_groups).toEqual({ enable: true, metric: 'score', max_num_gen_batches: 10 });
    const batch = PromptSampler.fromConfig(12, config.data).batchAt({ epoch: 0, index: 0 });
    expect(batch.indices).toHaveLength(6);
    expect(batch.next).toEqual({ epoch: 0, index: 6 });
    expect(() => PromptSampler.fromConfig(5, config.data)).toThrow(
      /^data\.gen_batch_size=6 is larger than the 5 training prompts/,
    );
  });

  it(
    'refuses gen_batch_size without dynamic sampling, seq_final_reward with a KL penalty in the reward, and a ' +
      'negative cap',
    () => {
      expect(() => loadConfig({ overrides: [...small, 'data.gen_batch_size=6'] })).toThrow(
        /data\.gen_batch_size=6 differs from data\.train_batch_size=4 but algorithm\.filter_groups\.enable=false/,
      );
      expect(() =>
        loadConfig({
          overrides: [
            'algorithm.filter_groups.enable=true',
            'algorithm.filter_groups.metric=seq_final_reward',
            'algorithm.use_kl_in_reward=true',
          ],
        }),
      ).toThrow(/algorithm\.filter_groups\.metric=seq_final_reward with algorithm\.use_kl_in_reward=true/);
      expect(() => loadConfig({ overrides: ['algorithm.filter_groups.max_num_gen_batches=-1'] })).toThrow(
        /max_num_gen_batches/,
      );
    },
  );

  it("accepts the DAPO recipe's reward.reward_manager.name for reward_model.reward_manager", () => {
    expect(loadConfig({ overrides: ['reward.reward_manager.name=dapo'] }).reward_model.reward_manager).toBe('dapo');
  });
});
