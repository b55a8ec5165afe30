// `node train.js` with frozen models in bf16: a KL-loss run whose reference is stored in bf16 and whose frozen
// critic is too, as fsdp_config.model_dtype asks; the memory plan shows them in bf16, the actor asked for bf16
// gets the one line saying it trains in float32, and the step's KL to the reference is finite and small (the
// reference starts as the actor, rounded to bf16).
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { makeTinyRun, runMetrics } from './tiny-run.ts';
import { runCli } from '../cpu/run-cli.ts';

describe('frozen models in bf16 from the command line', () => {
  it('runs a step with a bf16 reference and a bf16 frozen critic', async () => {
    const { root, overrides } = await makeTinyRun(6);
    const runDir = join(root, 'half-run');
    const { code, stdout, stderr } = await runCli([
      ...overrides, 'trainer.logger=[console,file]', 'trainer.total_training_steps=1', `trainer.default_local_dir=${runDir}`,
      'actor_rollout_ref.actor.use_kl_loss=true', 'actor_rollout_ref.ref.fsdp_config.model_dtype=bf16',
      'critic.freeze=true', 'critic.model.fsdp_config.model_dtype=bfloat16', 'actor_rollout_ref.actor.fsdp_config.model_dtype=bf16',
    ]);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain('actor_rollout_ref.actor.fsdp_config.model_dtype=bf16: this model trains, so its weights stay float32 master copies');
    expect(stdout).toMatch(/reference parameters \(bf16 matrices\)/);
    expect(stdout).toMatch(/critic parameters \(bf16 matrices\)/);
    const step = (await runMetrics(runDir)).find((l) => l.data['actor/kl_loss'] !== undefined)!;
    expect(Number.isFinite(step.data['actor/kl_loss'])).toBe(true);
    expect(Math.abs(step.data['actor/kl_loss'])).toBeLessThan(1e-2);
    expect(Number.isFinite(step.data['critic/values/mean'])).toBe(true);
  });
});
