// One short run per verl estimator and policy loss added after the first wave (algorithm.adv_estimator,
// actor_rollout_ref.actor.policy_loss.loss_mode): the config accepts the name, the trainer dispatches it, and
// every metric the step logs is finite.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

const RUNS: [string, string[]][] = [
  ['adv_estimator=grpo_vectorized', ['algorithm.adv_estimator=grpo_vectorized']],
  ['adv_estimator=rloo_vectorized', ['algorithm.adv_estimator=rloo_vectorized']],
  ['adv_estimator=gpg', ['algorithm.adv_estimator=gpg']],
  ['loss_mode=gpg', ['algorithm.adv_estimator=gpg', 'actor_rollout_ref.actor.policy_loss.loss_mode=gpg']],
  ['loss_mode=geo_mean', ['actor_rollout_ref.actor.policy_loss.loss_mode=geo_mean']],
  ['loss_mode=cispo', ['actor_rollout_ref.actor.policy_loss.loss_mode=cispo']],
  ['loss_mode=sapo', ['actor_rollout_ref.actor.policy_loss.loss_mode=sapo', 'actor_rollout_ref.actor.tau_neg=2']],
  [
    'loss_mode=clip_cov',
    [
      'actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov',
      'actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.1',
    ],
  ],
  [
    'loss_mode=kl_cov',
    ['actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov', 'actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.1'],
  ],
];

describe('new estimators and policy losses in a run', () => {
  for (const [name, settings] of RUNS) {
    it(`${name}: one step with finite metrics`, async () => {
      const { root, overrides } = await makeTinyRun();
      const dir = join(root, 'run');
      expect(
        await main([
          ...overrides,
          'algorithm.adv_estimator=grpo',
          'actor_rollout_ref.rollout.n=2',
          ...settings,
          'trainer.total_training_steps=1',
          `trainer.default_local_dir=${dir}`,
        ]),
      ).toBe(0);
      const steps = (await runMetrics(dir)).map((l) => l.data).filter((m) => m['critic/score/mean'] !== undefined);
      expect(steps).toHaveLength(1);
      for (const [key, value] of Object.entries(steps[0]))
        expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      expect(steps[0]['actor/pg_loss']).toBeDefined();
    }, 300_000);
  }
});
