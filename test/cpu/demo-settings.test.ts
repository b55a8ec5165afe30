// The demo's settings panel maps to valid configurations of the default job with the intended keys.
import { describe, expect, test } from 'vitest';
import { batchSizes, usesCritic } from '../../ppo/config.ts';
import { demoConfig, GRPO_SAMPLES_PER_PROMPT, type DemoSettings } from '../../demo/src/settings.ts';

const BASE: DemoSettings = { estimator: 'gae', lr: 2e-4, klCoef: 0.001, rewardMaskRatio: 0.25, freezeCritic: true, seed: 7, warmStartSteps: 10, batchSize: 8, steps: 5 };

describe('demo settings', () => {
  test('GAE with a frozen critic, KL in the reward, reward mask and seed', () => {
    const c = demoConfig(BASE);
    expect(usesCritic(c)).toBe(true);
    expect(c.critic.freeze).toBe(true);
    expect(c.algorithm.use_kl_in_reward).toBe(true);
    expect(c.algorithm.kl_ctrl.kl_coef).toBe(0.001);
    expect(c.algorithm.reward_mask_ratio).toBe(0.25);
    expect(c.actor_rollout_ref.actor.optim.lr).toBe(2e-4);
    expect([c.trainer.seed, c.data.seed]).toEqual([7, 7]);
    expect(c.trainer.total_training_steps).toBe(5);
    expect(batchSizes(c)).toMatchObject({ sequences: 8, actorMiniBatch: 4 });
  });

  test('GRPO samples several responses per prompt and turns the KL penalty off at β = 0', () => {
    const c = demoConfig({ ...BASE, estimator: 'grpo', klCoef: 0, freezeCritic: false });
    expect(usesCritic(c)).toBe(false);
    expect(c.actor_rollout_ref.rollout.n).toBe(GRPO_SAMPLES_PER_PROMPT);
    expect(c.algorithm.use_kl_in_reward).toBe(false);
    expect(batchSizes(c).sequences).toBe(8 * GRPO_SAMPLES_PER_PROMPT);
  });

  test('an invalid setting is a configuration error naming the key', () => {
    expect(() => demoConfig({ ...BASE, rewardMaskRatio: 2 })).toThrow(/reward_mask_ratio/);
  });
});
