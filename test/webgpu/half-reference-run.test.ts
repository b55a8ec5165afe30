// `node train.js` with frozen models in bf16: a KL-loss run whose reference is stored in bf16 and whose frozen
// critic is too, as fsdp_config.model_dtype asks; the memory plan shows them in bf16, the actor asked for bf16
// gets the one line saying it trains in float32, and the step's KL to the reference is small but not the float32
// reference's (the reference starts as the actor, rounded to bf16: the trainer really took the half path).
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';

describe('frozen models in bf16 from the command line', () => {
  it('runs a step with a bf16 reference and a bf16 frozen critic', async () => {
    const { root, overrides } = await makeTinyRun(6);
    const run = (name: string, extra: string[]) =>
      runCli([
        ...overrides,
        'trainer.logger=[console,file]',
        'trainer.total_training_steps=1',
        `trainer.default_local_dir=${join(root, name)}`,
        'actor_rollout_ref.actor.use_kl_loss=true',
        'critic.freeze=true',
        ...extra,
      ]);
    const klLoss = async (name: string) =>
      (await runMetrics(join(root, name))).find((l) => l.data['actor/kl_loss'] !== undefined)!.data;
    // The two runs differ only in the reference's dtype, so a different KL can only come from the reference.
    const halfOthers = [
      'critic.model.fsdp_config.model_dtype=bfloat16',
      'actor_rollout_ref.actor.fsdp_config.model_dtype=bf16',
    ];
    const { code, stdout, stderr } = await run('half-run', [
      'actor_rollout_ref.ref.fsdp_config.model_dtype=bf16',
      ...halfOthers,
    ]);
    expect(code, stderr).toBe(0);
    expect(stderr).toContain(
      'actor_rollout_ref.actor.fsdp_config.model_dtype=bf16: this model trains, so its weights stay float32 master ' +
        'copies',
    );
    expect(stdout).toMatch(/reference parameters \(bf16 matrices\)/);
    expect(stdout).toMatch(/critic parameters \(bf16 matrices\)/);
    const half = await klLoss('half-run');
    expect(Math.abs(half['actor/kl_loss'])).toBeLessThan(1e-2);
    expect(Number.isFinite(half['critic/values/mean'])).toBe(true);
    const f32 = await run('f32-reference-run', ['actor_rollout_ref.ref.fsdp_config.model_dtype=fp32', ...halfOthers]);
    expect(f32.code, f32.stderr).toBe(0);
    expect(f32.stdout).not.toMatch(/reference parameters \(bf16 matrices\)/);
    expect(f32.stdout).toMatch(/critic parameters \(bf16 matrices\)/);
    const full = await klLoss('f32-reference-run');
    // Same rollout and the same bf16 critic's values; the KL to the reference alone moves, by bf16 rounding's size.
    expect(half['critic/values/mean']).toBe(full['critic/values/mean']);
    expect(half['critic/advantages/max']).toBe(full['critic/advantages/max']);
    expect(half['actor/kl_loss']).not.toBe(full['actor/kl_loss']);
    expect(Math.abs(half['actor/kl_loss'] - full['actor/kl_loss'])).toBeLessThan(1e-4);
  });
});
