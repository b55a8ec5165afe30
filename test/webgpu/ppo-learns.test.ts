// PPO does what it is for: on a micro task whose reward a tiny random model earns only by chance (a response
// that contains the digit 7), the mean reward rises within a few GRPO steps. A broken sign, a zero
// gradient or an update that never reaches the weights leaves it flat (lr 0: 0.15 → 0.15; lr 3e-2: 0.17 → 1.00).
import { describe, it, expect } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

describe('PPO on a micro task', () => {
  it('raises the mean reward', async () => {
    const { root, overrides } = await makeTinyRun();
    const rewardModule = join(root, 'contains-seven.mjs');
    await writeFile(
      rewardModule,
      "export function compute_score(dataSource, solution) { return solution.includes('7') ? 1 : 0; }\n",
    );
    const dir = join(root, 'run');
    expect(
      await main([
        ...overrides,
        `custom_reward_function.path=${rewardModule}`,
        'algorithm.adv_estimator=grpo',
        'actor_rollout_ref.rollout.n=4',
        'actor_rollout_ref.actor.optim.lr=3e-2',
        'trainer.total_training_steps=12',
        `trainer.default_local_dir=${dir}`,
      ]),
    ).toBe(0);
    const lines = (await runMetrics(dir)).map((l) => l.data);
    const rewards = lines.filter((m) => m['critic/score/mean'] !== undefined).map((m) => m['critic/score/mean']);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const first = mean(rewards.slice(0, 3));
    const last = mean(rewards.slice(-3));
    expect(last, `mean reward per step: ${rewards.map((r) => r.toFixed(2)).join(' ')}`).toBeGreaterThan(first + 0.3);
  });
});
