// Whole PPO runs through `node train.js`'s entry point on a tiny model: GRPO (no critic), GAE with a frozen
// critic (values computed, nothing trained, charts drawn at the end), and the reward mask at ratio 1 (every
// trajectory's reward zeroed); the reference's weights exist only where a KL term reads them.
import { describe, it, expect, vi } from 'vitest';
import { Engine } from '../../engine/index.ts';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { plotRun } from '../../tools/plot/cli.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

async function stepMetrics(dir: string): Promise<Record<string, number>[]> {
  const lines = (await runMetrics(dir)).map((l) => l.data);
  return lines.filter((m) => m['critic/score/mean'] !== undefined);
}

function expectFinite(metrics: Record<string, number>): void {
  for (const [key, value] of Object.entries(metrics)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
}

describe('PPO trainer runs', () => {
  it('GRPO: groups of n samples, no critic allocated or reported', async () => {
    const { root, overrides } = await makeTinyRun();
    const dir = join(root, 'grpo');
    expect(
      await main([
        ...overrides,
        'algorithm.adv_estimator=grpo',
        'actor_rollout_ref.rollout.n=2',
        'actor_rollout_ref.actor.use_kl_loss=true',
        'trainer.total_training_steps=2',
        `trainer.default_local_dir=${dir}`,
      ]),
    ).toBe(0);
    const steps = await stepMetrics(dir);
    expect(steps).toHaveLength(2);
    for (const m of steps) {
      expectFinite(m);
      // low_var_kl (k3) is never negative; a missing metric fails here too.
      expect(m['actor/kl_loss']).toBeGreaterThanOrEqual(0);
      expect(Object.keys(m).some((k) => k.startsWith('critic/vf') || k.startsWith('critic/values'))).toBe(false);
    }
    await expect(readFile(join(dir, 'global_step_2', 'critic', 'config.json'))).rejects.toThrow();
  }, 300_000);

  it('allocates the reference copy of the actor only where a KL term reads it (as verl adds the RefPolicy ' +
    'role)', async () => {
    const { root, overrides } = await makeTinyRun();
    /** Labels of every buffer the run allocates. */
    const labels = async (name: string, extra: string[]) => {
      const createBuffer = vi.spyOn(Engine.prototype, 'createBuffer');
      try {
        expect(
          await main([
            ...overrides,
            ...extra,
            'trainer.total_training_steps=1',
            `trainer.default_local_dir=${join(root, name)}`,
          ]),
        ).toBe(0);
        return createBuffer.mock.calls.map(([label]) => label);
      } finally {
        createBuffer.mockRestore();
      }
    };
    expect(
      (await labels('kl', ['actor_rollout_ref.actor.use_kl_loss=true'])).some((label) => label.startsWith('reference')),
    ).toBe(true);
    expect((await labels('no-kl', [])).filter((label) => label.startsWith('reference'))).toEqual([]);
  }, 300_000);

  it('GAE with critic.freeze: values feed GAE, the critic never changes and reports no vf_loss', async () => {
    const { root, overrides } = await makeTinyRun();
    const dir = join(root, 'frozen');
    expect(
      await main(
        [
          ...overrides,
          'critic.freeze=true',
          'trainer.save_freq=1',
          'trainer.total_training_steps=2',
          `trainer.default_local_dir=${dir}`,
        ],
        { writeCharts: plotRun },
      ),
    ).toBe(0);
    expect(await readFile(join(dir, 'charts', 'index.html'), 'utf8')).toContain('<svg');
    const steps = await stepMetrics(dir);
    expect(steps).toHaveLength(2);
    for (const m of steps) {
      expectFinite(m);
      expect(m['critic/frozen']).toBe(1);
      expect(m['critic/vf_loss']).toBeUndefined();
      expect(m['critic/values/max']).toBeGreaterThan(m['critic/values/min']);
      expect(m['critic/values/mean']).toBeGreaterThanOrEqual(m['critic/values/min']);
      expect(m['critic/values/mean']).toBeLessThanOrEqual(m['critic/values/max']);
    }
    const critic = async (step: number) => readFile(join(dir, `global_step_${step}`, 'critic', 'model.safetensors'));
    expect(Buffer.compare(await critic(1), await critic(2))).toBe(0);
    await expect(readFile(join(dir, 'global_step_2', 'critic', 'optimizer.safetensors'))).rejects.toThrow();
    const actor = async (step: number) => readFile(join(dir, `global_step_${step}`, 'actor', 'model.safetensors'));
    expect(Buffer.compare(await actor(1), await actor(2))).not.toBe(0);
  }, 300_000);

  it('use_dynamic_bsz and gradient checkpointing: the losses and gradient norms of fixed micro-batches with stored ' +
    'activations', async () => {
    const { root, overrides } = await makeTinyRun();
    const run = async (name: string, extra: string[]) => {
      const dir = join(root, name);
      expect(
        await main([
          ...overrides,
          'actor_rollout_ref.actor.use_kl_loss=true',
          'trainer.total_training_steps=1',
          `trainer.default_local_dir=${dir}`,
          ...extra,
        ]),
      ).toBe(0);
      return (await stepMetrics(dir))[0];
    };
    const fixed = await run('fixed', []);
    const budget = await run('budget', [
      'actor_rollout_ref.actor.use_dynamic_bsz=true',
      'actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40',
      'critic.ppo_max_token_len_per_gpu=40',
      'actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true',
      'actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=40',
      'actor_rollout_ref.model.enable_gradient_checkpointing=true',
      'critic.model.enable_gradient_checkpointing=true',
    ]);
    const compared = [
      'actor/pg_loss',
      'actor/kl_loss',
      'actor/entropy',
      'actor/grad_norm',
      'critic/vf_loss',
      'critic/grad_norm',
      'critic/advantages/mean',
    ];
    for (const key of compared) {
      expect(fixed[key], key).toBeDefined();
      expect(Math.abs(budget[key] - fixed[key]), key).toBeLessThan(1e-5 * Math.max(1, Math.abs(fixed[key])));
    }
  }, 300_000);

  it('reward_mask_ratio=1 zeroes every trajectory reward and logs the realised ratio', async () => {
    const { root, overrides } = await makeTinyRun();
    // Every response scores 1, so a zero reward can only come from the mask.
    const rewardModule = join(root, 'always-one.mjs');
    await writeFile(rewardModule, 'export function compute_score() { return 1; }\n');
    const run = async (ratio: number) => {
      const dir = join(root, `masked-${ratio}`);
      expect(
        await main([
          ...overrides,
          `custom_reward_function.path=${rewardModule}`,
          `algorithm.reward_mask_ratio=${ratio}`,
          'trainer.total_training_steps=1',
          `trainer.default_local_dir=${dir}`,
        ]),
      ).toBe(0);
      return (await stepMetrics(dir))[0];
    };
    const unmasked = await run(0);
    expect(unmasked['critic/rewards/min']).toBe(1);
    expect(unmasked['critic/score/accuracy']).toBe(1);
    const masked = await run(1);
    expect(masked['critic/score/mean']).toBe(1);
    expect(masked['reward_mask/ratio_actual']).toBe(1);
    expect(masked['critic/rewards/max']).toBe(0);
  }, 300_000);
});
