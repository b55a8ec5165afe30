// The LoRA base stored as frozen weights: in its checkpoint's bf16 (actor_rollout_ref.actor.fsdp_config.model_dtype
// null, the default) the run is bit-identical to the same run with the base widened to float32 (model_dtype=fp32):
// bf16 values are exact in float32 and the kernels unpack them before any arithmetic, so with the same kernels on
// both sides (the paths only float32 weights take — transposed copies, matmul prologues, the fused decode layer —
// switched off for both runs) every sample, loss and gradient norm agrees. In NF4 (load_in_4bit) the run trains
// with the device's default kernels, the reference is the same quantized base (KL exactly 0 before the first
// update), the saved base re-quantizes to the same codes (a resumed run repeats the uninterrupted one), and the
// quantized model's log-probs stay near the bf16 model's. The memory plan prints each storage.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { Engine, readKnobs, type Arena } from '../../engine/index.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
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

/** The tiny run's model saved as bf16 (as Qwen releases are), and LoRA runs of two steps on it. */
async function bf16LoraRuns() {
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
  const run = async (name: string, extra: string[], knobs = SAME_KERNELS) => {
    const dir = join(root, name);
    const printed = await runCli([...common, `trainer.default_local_dir=${dir}`, ...extra], {}, { knobs });
    expect(printed.code, printed.stderr).toBe(0);
    const metrics = (await runMetrics(dir)).map((m) => withoutTimings(m.data));
    const planLine = printed.stdout.split('\n').find((line) => line.includes('actor parameters'))!;
    return { dir, metrics, planLine };
  };
  return { model, run };
}

describe('LoRA on a frozen base in bf16 or NF4', () => {
  it('bf16: trains as the float32 base holding the same values, with half the base bytes in the plan', async () => {
    const { run } = await bf16LoraRuns();
    const half = await run('bf16', []);
    const full = await run('fp32', ['actor_rollout_ref.actor.fsdp_config.model_dtype=fp32']);
    expect(half.metrics.length).toBeGreaterThan(0);
    expect(half.metrics).toEqual(full.metrics);
    expect(half.planLine).toMatch(/actor parameters \(bf16 matrices\)/);
    expect(full.planLine).toMatch(/actor parameters\s+\d/);
  });

  it('load_in_4bit: an NF4 base trains, is its own reference, saves re-quantizable weights', async () => {
    const { model, run } = await bf16LoraRuns();
    // One mini-batch a step, so the first step's KL is measured before any update; a checkpoint every step.
    const nf4 = [
      'actor_rollout_ref.model.load_in_4bit=true',
      'actor_rollout_ref.actor.ppo_mini_batch_size=4',
      'trainer.save_freq=1',
    ];
    const quantized = await run('nf4', nf4, readKnobs());
    expect(quantized.planLine).toMatch(/actor parameters \(nf4 layer matrices, bf16 embedding\)/);
    const updates = quantized.metrics.filter((m) => m['actor/kl_loss'] !== undefined);
    expect(updates[0]['actor/kl_loss']).toBe(0);
    expect(updates[1]['actor/kl_loss']).toBeGreaterThan(0);
    expect(Number.isFinite(updates[1]['actor/pg_loss'])).toBe(true);

    // Stopped after step 1 and resumed (the base quantized again from its save; float32, the exact-resume save
    // dtype, for the trained critic's sake): step 2 as in one run.
    const resumable = [...nf4, 'trainer.save_dtype=float32'];
    await run('nf4-resumed', [...resumable, 'trainer.total_training_steps=1'], readKnobs());
    expect((await run('nf4-resumed', resumable, readKnobs())).metrics).toEqual(quantized.metrics);

    const engine = await Engine.create();
    try {
      // The saved base (dequantized, in the checkpoint's bf16) quantizes to the codes the run used.
      const original = await loadModel(engine, model, { weightDtype: () => 'nf4' });
      const saved = await loadModel(engine, join(quantized.dir, 'global_step_2', 'actor'), {
        weightDtype: () => 'nf4',
      });
      for (const name of original.params.names()) {
        const read = (params: Arena) =>
          params.dtypeOf(name) === 'u32' ? engine.read(params.words(name)) : engine.read(params.get(name));
        expect(await read(saved.params), name).toEqual(await read(original.params));
      }
      // Next-token log-probs of the NF4 model against the bf16 one.
      const bf16 = await loadModel(engine, model, { weightDtype: () => 'bf16' });
      const logProbs = async (params: Arena) => {
        const lm = new CausalLm(engine, bf16.config, params);
        const ids = [[1, 5, 7, 2, 9, 4, 3, 8]];
        const batch = uploadTokenBatch(
          engine,
          { inputIds: ids, attentionMask: [ids[0].map(() => 1)] },
          bf16.config.vocabSize,
        );
        const V = bf16.config.vocabSize;
        const logits = await engine.read(lm.logits(batch, engine.tensor('logits', [ids[0].length, V])));
        return Array.from({ length: ids[0].length }, (_, t) => {
          const row = logits.subarray(t * V, (t + 1) * V);
          const max = Math.max(...row);
          const lse = max + Math.log(row.reduce((s, z) => s + Math.exp(z - max), 0));
          return Array.from(row, (z) => z - lse);
        }).flat();
      };
      const [exact, nf4] = [await logProbs(bf16.params), await logProbs(original.params)];
      const gap = Math.max(...exact.map((v, i) => Math.abs(v - nf4[i])));
      console.log(`NF4 vs bf16 base: largest next-token log-prob gap ${gap.toFixed(4)} nats`);
      expect(gap).toBeGreaterThan(0);
      expect(gap).toBeLessThan(0.1);
    } finally {
      engine.destroy();
    }
  });
});
