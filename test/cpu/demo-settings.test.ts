// The demo's settings panel maps to valid configurations of the default job with the intended keys.
import { describe, expect, test } from 'vitest';
import { batchSizes, usesCritic } from '../../ppo/config.ts';
import { demoConfig, GRPO_SAMPLES_PER_PROMPT, trainCommand, type DemoSettings } from '../../demo/src/settings.ts';
import { SHIPPED_CHECKPOINT_PATH } from '../../demo/src/shipped-checkpoint.ts';
import { formatValue } from '../../demo/src/format-value.ts';
import { parse as parseYaml } from 'yaml';
import { runCli } from '../support/run-cli.ts';

const BASE: DemoSettings = {
  estimator: 'gae',
  lr: 2e-4,
  klCoef: 0.001,
  rewardMaskRatio: 0.25,
  freezeCritic: true,
  seed: 7,
  checkpoint: null,
  warmStartSteps: 10,
  batchSize: 8,
  steps: 5,
};

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

  test(
    'from the shipped checkpoint: its path, and its data.seed so validation stays on prompts its warm start never ' +
      'saw',
    () => {
      const c = demoConfig({ ...BASE, checkpoint: { dataSeed: 3 } });
      expect(c.actor_rollout_ref.model.path).toBe(SHIPPED_CHECKPOINT_PATH);
      expect([c.trainer.seed, c.data.seed]).toEqual([7, 3]);
      expect(demoConfig(BASE).actor_rollout_ref.model.path).toBeNull();
    },
  );

  test.each([
    BASE,
    { ...BASE, checkpoint: { dataSeed: 1 } },
    { ...BASE, estimator: 'grpo' as const, klCoef: 0, freezeCritic: false },
  ])('the command line shown runs as written, with the same configuration (%#)', async (settings) => {
    const { command, differences } = trainCommand(settings);
    const [node, script, ...args] = command.split(' ');
    expect(`${node} ${script}`).toBe('node train.js');
    const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...args]);
    expect(code, stderr).toBe(0);
    expect(parseYaml(stdout)).toEqual(demoConfig(settings));
    expect(differences.some((d) => d.includes('warm start'))).toBe(settings.checkpoint === null);
  });

  test('an invalid setting is a configuration error naming the key', () => {
    expect(() => demoConfig({ ...BASE, rewardMaskRatio: 2 })).toThrow(/reward_mask_ratio/);
  });
});

describe('chart numbers', () => {
  test('three significant digits, and negative values keep a visible minus sign', () => {
    expect([0, 1, 0.25, 12.345, 0.000512, -0.0005, -0.2, 123456, -3e-7].map(formatValue)).toEqual([
      '0',
      '1',
      '0.25',
      '12.3',
      '5.12e-4',
      '\u22125e-4',
      '\u22120.2',
      '1.23e+5',
      '\u22123e-7',
    ]);
  });
});
