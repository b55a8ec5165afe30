// The experience stays on the device: each micro-batch gathers its rows of the old and reference log-probs,
// advantages, values, returns and response mask there, and an update's losses come back in one read-back at its
// end. So twice the micro-batches (the same mini-batches) cost no more read-backs, and give the same losses and
// gradient norms up to float rounding. Nor do uploaded bytes: each micro-batch uploads its token rows and the
// embedding backward's index of them (models/token-batch.ts uploadTokenIndex: two u32 per token, whatever the
// vocabulary), the same bytes in more pieces. Two PPO steps of `node train.js` on a tiny model.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

const MICRO_BATCH_KEYS = [
  'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu',
  'critic.ppo_micro_batch_size_per_gpu',
  'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu',
  'critic.forward_micro_batch_size_per_gpu',
];

describe('read-backs per step', () => {
  it('do not grow with the number of micro-batches, and the losses stay the same', async () => {
    const { root, overrides } = await makeTinyRun();
    const run = async (microBatchSize: number) => {
      const dir = join(root, `micro-${microBatchSize}`);
      // 4 sequences a step, mini-batches of 2: one or two micro-batches per mini-batch, in every phase.
      expect(
        await main([
          ...overrides,
          'actor_rollout_ref.actor.use_kl_loss=true',
          'trainer.total_training_steps=2',
          `trainer.default_local_dir=${dir}`,
          ...MICRO_BATCH_KEYS.map((key) => `${key}=${microBatchSize}`),
        ]),
      ).toBe(0);
      return (await runMetrics(dir)).map((line) => line.data).filter((m) => m['perf/readbacks'] !== undefined);
    };
    const whole = await run(2);
    const halved = await run(1);
    expect(halved).toHaveLength(2);
    halved.forEach((step, i) => {
      expect(step['perf/readbacks'], `step ${i + 1} read-backs`).toBe(whole[i]['perf/readbacks']);
      // The actor and the critic each run 4 backwards instead of 2, each with the token index of its own rows.
      expect(step['perf/upload_bytes'], `step ${i + 1} uploaded bytes`).toBe(whole[i]['perf/upload_bytes']);
      expect(step['perf/uploads'], `step ${i + 1} uploads`).toBeGreaterThan(whole[i]['perf/uploads']);
      for (const key of [
        'actor/pg_loss',
        'actor/kl_loss',
        'actor/grad_norm',
        'critic/vf_loss',
        'critic/grad_norm',
        'critic/values/mean',
        'critic/advantages/mean',
      ]) {
        expect(step[key], key).toBeDefined();
        expect(
          Math.abs(step[key] - whole[i][key]),
          `step ${i + 1} ${key}: ${step[key]} vs ${whole[i][key]}`,
        ).toBeLessThan(1e-5 * Math.max(1, Math.abs(whole[i][key])));
      }
    });
  }, 300_000);
});
