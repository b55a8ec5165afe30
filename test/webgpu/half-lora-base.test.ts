// A LoRA base kept in its checkpoint's bf16 (actor_rollout_ref.actor.fsdp_config.model_dtype null, the default):
// the run is bit-identical to the same run with the base widened to float32 (model_dtype=fp32). bf16 values are
// exact in float32 and the kernels unpack them before any arithmetic, so with the same kernels on both sides (the
// paths only float32 weights take — transposed copies, matmul prologues, the fused decode layer — switched off for
// both runs) every sample, loss and gradient norm agrees. The memory plan prints the base as bf16.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { Engine, readKnobs } from '../../engine/index.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';

/** The float32-only paths off, so both runs dispatch the same kernels in the same order. */
const SAME_KERNELS = readKnobs({
  ...process.env,
  WEBGPU_KERNEL_VARIANTS: 'transposed-weights:as-stored,decode-weights:as-stored,matmul-prologue:separate',
});

function withoutTimings(metrics: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(metrics).filter(([key]) => !key.startsWith('timing_s/') && !key.startsWith('perf/')),
  );
}

describe('LoRA on a bf16 base', () => {
  it('trains as the float32 base holding the same values, with half the base bytes in the plan', async () => {
    const { root, overrides } = await makeTinyRun();
    const model = join(root, 'model-bf16');
    const engine = await Engine.create();
    try {
      const loaded = await loadModel(engine, join(root, 'model'));
      await saveModel(engine, model, loaded.config, loaded.params, {
        dtype: 'bfloat16',
        tokenizerFrom: join(root, 'model'),
      });
    } finally {
      engine.destroy();
    }
    const common = [
      ...overrides,
      `actor_rollout_ref.model.path=${model}`,
      'actor_rollout_ref.model.lora_rank=8',
      'actor_rollout_ref.actor.use_kl_loss=true',
      'trainer.total_training_steps=2',
      'trainer.logger=[console,file]',
    ];
    const run = async (name: string, extra: string[]) => {
      const dir = join(root, name);
      const printed = await runCli(
        [...common, `trainer.default_local_dir=${dir}`, ...extra],
        {},
        {
          knobs: SAME_KERNELS,
        },
      );
      expect(printed.code, printed.stderr).toBe(0);
      const metrics = (await runMetrics(dir)).map((m) => withoutTimings(m.data));
      const planLine = printed.stdout.split('\n').find((line) => line.includes('actor parameters'))!;
      return { metrics, planLine };
    };
    const half = await run('bf16', []);
    const full = await run('fp32', ['actor_rollout_ref.actor.fsdp_config.model_dtype=fp32']);
    expect(half.metrics.length).toBeGreaterThan(0);
    expect(half.metrics.map((m) => Object.keys(m).sort())).toEqual(full.metrics.map((m) => Object.keys(m).sort()));
    half.metrics.forEach((metrics, step) => {
      for (const [key, value] of Object.entries(metrics)) {
        const expected = full.metrics[step][key];
        expect(value, `step ${step} ${key}`).toBe(expected);
      }
    });
    expect(half.planLine).toMatch(/actor parameters \(bf16 matrices\)/);
    expect(full.planLine).toMatch(/actor parameters\s+\d/);
  });
});
