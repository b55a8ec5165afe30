// DAPO's dynamic sampling (algorithm.filter_groups) in whole runs of the tiny model: prompts whose ground truth is
// not a multiple of 3 score a constant 1 (a uniform group, dropped), the others 1 then 0 within their group of 2
// (kept), so a step draws generation batches until data.train_batch_size prompts are kept. The extra batches move
// the data cursor, so a run resumed after such a step matches one that never stopped.
import { describe, it, expect } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

const stepLines = async (dir: string) =>
  (await runMetrics(dir))
    .map((l) => l.data)
    .filter((m) => m['critic/score/mean'] !== undefined)
    .map((m) =>
      Object.fromEntries(Object.entries(m).filter(([k]) => !k.startsWith('timing_s/') && !k.startsWith('perf/'))),
    );

describe('DAPO dynamic sampling run', () => {
  it('keeps generating while groups are uniform, reports train/num_gen_batches, and resumes exactly', async () => {
    const { root, overrides } = await makeTinyRun(12);
    const reward = join(root, 'some-uniform.mjs');
    // Every generation batch makes an even number of calls, so each group's first call has an even count (also after a
    // resume).
    await writeFile(
      reward,
      'let calls = 0;\nexport function compute_score(source, text, truth) { const parity = calls++ % 2; return ' +
        'Number(truth) % 3 === 0 ? 1 - parity : 1; }\n',
    );
    const common = [
      ...overrides,
      `custom_reward_function.path=${reward}`,
      'algorithm.adv_estimator=grpo',
      'actor_rollout_ref.rollout.n=2',
      'data.train_batch_size=2',
      'data.gen_batch_size=4',
      'algorithm.filter_groups.enable=true',
      // verl 1dda039b has no default metric.
      'algorithm.filter_groups.metric=acc',
      'algorithm.filter_groups.max_num_gen_batches=20',
    ];
    const straight = join(root, 'straight');
    expect(await main([...common, `trainer.default_local_dir=${straight}`, 'trainer.total_training_steps=3'])).toBe(0);
    const steps = await stepLines(straight);
    expect(steps).toHaveLength(3);
    for (const m of steps) {
      for (const [key, value] of Object.entries(m)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      // Only kept groups are trained on: each has one 1 and one 0.
      expect(m['critic/score/mean']).toBe(0.5);
    }
    // Before the checkpoint at step 2, a step drew more than one generation batch.
    expect(
      steps.slice(0, 2).some((m) => m['train/num_gen_batches'] > 1),
      JSON.stringify(steps.map((m) => m['train/num_gen_batches'])),
    ).toBe(true);

    const resumed = join(root, 'resumed');
    expect(await main([...common, `trainer.default_local_dir=${resumed}`, 'trainer.total_training_steps=2'])).toBe(0);
    expect(await main([...common, `trainer.default_local_dir=${resumed}`, 'trainer.total_training_steps=3'])).toBe(0);
    expect(await stepLines(resumed)).toEqual(steps);
  }, 600_000);

  it("stops with verl's error when max_num_gen_batches batches keep no prompt", async () => {
    const { root, overrides } = await makeTinyRun(12);
    const reward = join(root, 'always-one.mjs');
    await writeFile(reward, 'export function compute_score() { return 1; }\n');
    await expect(
      main([
        ...overrides,
        `custom_reward_function.path=${reward}`,
        'algorithm.adv_estimator=grpo',
        'actor_rollout_ref.rollout.n=2',
        'data.train_batch_size=2',
        'algorithm.filter_groups.enable=true',
        // verl 1dda039b has no default metric.
        'algorithm.filter_groups.metric=acc',
        'algorithm.filter_groups.max_num_gen_batches=2',
        `trainer.default_local_dir=${join(root, 'uniform')}`,
        'trainer.total_training_steps=1',
      ]),
    ).rejects.toThrow(
      'num_gen_batches=2 >= max_num_gen_batches=2. Generated too many. Please check if your data are too difficult. ' +
        'You could also try set max_num_gen_batches=0 to enable endless trials.',
    );
  }, 300_000);
});
