// The LoRA base stored as frozen weights: in its checkpoint's bf16 (actor_rollout_ref.actor.fsdp_config.model_dtype
// null, the default) the run is bit-identical to the same run with the base widened to float32 (model_dtype=fp32):
// bf16 values are exact in float32 and the kernels unpack them before any arithmetic, so with the same kernels on
// both sides (the paths only float32 weights take — transposed copies, matmul prologues, the fused decode layer —
// switched off for both runs) every sample, loss and gradient norm agrees. In NF4 (load_in_4bit) and int8
// (load_in_8bit) the run trains with the device's default kernels, the reference is the same quantized base (KL
// exactly 0 before the first update), the saved base re-quantizes to the same codes (a resumed run repeats the
// uninterrupted one), and the quantized model's log-probs stay near the bf16 model's; NF4 with double-quantized
// scales (use_bnb_nested_quant) trains and stays nearer plain NF4 than NF4 is to bf16. The memory plan prints each
// storage.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { Engine, readKnobs, type Arena } from '../../engine/index.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { makeTinyRun, runMetrics, saveTinyModel } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';

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

/** The largest next-token log-prob gap between `reference`'s model and the same config over `params`. */
async function largestLogProbGap(
  engine: Engine,
  reference: { config: DecoderConfig; params: Arena },
  params: Arena,
): Promise<number> {
  const V = reference.config.vocabSize;
  const ids = [[1, 5, 7, 2, 9, 4, 3, 8]];
  const logProbs = async (weights: Arena) => {
    const lm = new CausalLm(engine, reference.config, weights);
    const batch = uploadTokenBatch(engine, { inputIds: ids, attentionMask: [ids[0].map(() => 1)] }, V);
    const logits = await engine.read(lm.logits(batch, engine.tensor('logits', [ids[0].length, V])));
    return Array.from({ length: ids[0].length }, (_, t) => {
      const row = logits.subarray(t * V, (t + 1) * V);
      const max = Math.max(...row);
      const lse = max + Math.log(row.reduce((sum, z) => sum + Math.exp(z - max), 0));
      return Array.from(row, (z) => z - lse);
    }).flat();
  };
  const [exact, approximate] = [await logProbs(reference.params), await logProbs(params)];
  return Math.max(...exact.map((v, i) => Math.abs(v - approximate[i])));
}

describe('LoRA on a frozen base in bf16, NF4 or int8', () => {
  it('bf16: trains as the float32 base holding the same values, with half the base bytes in the plan', async () => {
    const { run } = await bf16LoraRuns();
    const half = await run('bf16', []);
    const full = await run('fp32', ['actor_rollout_ref.actor.fsdp_config.model_dtype=fp32']);
    expect(half.metrics.length).toBeGreaterThan(0);
    expect(half.metrics).toEqual(full.metrics);
    expect(half.planLine).toMatch(/actor parameters \(bf16 matrices\)/);
    expect(full.planLine).toMatch(/actor parameters\s+\d/);
  });

  // NF4 moves log-probs by a few hundredths of a nat on this model, int8 (a step of absmax/127 per row) by far less.
  for (const [storage, key, largestGap] of [
    ['nf4', 'load_in_4bit', 0.1],
    ['int8', 'load_in_8bit', 0.01],
  ] as const) {
    it(`${key}: an ${storage} base trains, is its own reference, saves re-quantizable weights`, async () => {
      const { model, run } = await bf16LoraRuns();
      // One mini-batch a step, so the first step's KL is measured before any update; a checkpoint every step.
      const keys = [
        `actor_rollout_ref.model.${key}=true`,
        'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        'trainer.save_freq=1',
      ];
      const quantized = await run(storage, keys, readKnobs());
      expect(quantized.planLine).toMatch(
        new RegExp(`actor parameters \\(${storage} layer matrices, bf16 embedding\\)`),
      );
      const updates = quantized.metrics.filter((m) => m['actor/kl_loss'] !== undefined);
      expect(updates[0]['actor/kl_loss']).toBe(0);
      expect(updates[1]['actor/kl_loss']).toBeGreaterThan(0);
      expect(Number.isFinite(updates[1]['actor/pg_loss'])).toBe(true);

      // Stopped after step 1 and resumed (the base quantized again from its save; float32, the exact-resume save
      // dtype, for the trained critic's sake): step 2 as in one run.
      const resumable = [...keys, 'trainer.save_dtype=float32'];
      await run(`${storage}-resumed`, [...resumable, 'trainer.total_training_steps=1'], readKnobs());
      expect((await run(`${storage}-resumed`, resumable, readKnobs())).metrics).toEqual(quantized.metrics);

      const engine = await Engine.create();
      try {
        // The saved base (dequantized, in the checkpoint's bf16) quantizes to the codes and scales the run used.
        const original = await loadModel(engine, model, { weightDtype: () => storage });
        const saved = await loadModel(engine, join(quantized.dir, 'global_step_2', 'actor'), {
          weightDtype: () => storage,
        });
        for (const name of original.params.names()) {
          const read = (params: Arena) =>
            params.dtypeOf(name) === 'u32' ? engine.read(params.words(name)) : engine.read(params.get(name));
          expect(await read(saved.params), name).toEqual(await read(original.params));
        }
        const bf16 = await loadModel(engine, model, { weightDtype: () => 'bf16' });
        const gap = await largestLogProbGap(engine, bf16, original.params);
        console.log(`${storage} vs bf16 base: largest next-token log-prob gap ${gap.toFixed(4)} nats`);
        expect(gap).toBeGreaterThan(0);
        expect(gap).toBeLessThan(largestGap);
      } finally {
        engine.destroy();
      }
    });
  }

  it('use_bnb_nested_quant: double-quantized NF4 scales train, near plain NF4; a straddling q_proj is refused', async () => {
    const { model, run } = await bf16LoraRuns();
    const engine = await Engine.create();
    try {
      // The tiny run's q_proj [32, 32] is 16 blocks, not a whole 256-block, and is not the last part of the fused
      // q/k/v: its scales' blocks would straddle k_proj's.
      await expect(loadModel(engine, model, { weightDtype: () => 'nf4-nested' })).rejects.toThrow(
        /load_in_4bit with use_bnb_nested_quant: model\.layers\.0\.self_attn\.q_proj\.weight \[32, 32\] has 1024 elements, not a multiple of 16384/,
      );
      // Hidden 128 with four KV heads and 128 intermediate: every part whole 256-blocks of blocks.
      const wide = join(model, '..', 'model-wide');
      await saveTinyModel(wide, 'arithmetic', 5, { hidden: 128, heads: 4, kvHeads: 4, headDim: 32, intermediate: 128 });
      const nested = await run(
        'nf4-nested',
        [
          `actor_rollout_ref.model.path=${wide}`,
          'actor_rollout_ref.model.load_in_4bit=true',
          'actor_rollout_ref.model.use_bnb_nested_quant=true',
          'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        ],
        readKnobs(),
      );
      expect(nested.planLine).toMatch(/actor parameters \(nf4-nested layer matrices, f32 embedding\)/);
      const updates = nested.metrics.filter((m) => m['actor/kl_loss'] !== undefined);
      expect(updates[0]['actor/kl_loss']).toBe(0);
      expect(updates[1]['actor/kl_loss']).toBeGreaterThan(0);
      const plain = await loadModel(engine, wide, { weightDtype: () => 'nf4' });
      const double = await loadModel(engine, wide, { weightDtype: () => 'nf4-nested' });
      const exact = await loadModel(engine, wide);
      const [nf4Gap, nestedGap] = [
        await largestLogProbGap(engine, exact, plain.params),
        await largestLogProbGap(engine, exact, double.params),
      ];
      const between = await largestLogProbGap(engine, plain, double.params);
      console.log(
        `vs float32: nf4 ${nf4Gap.toFixed(4)}, double-quantized ${nestedGap.toFixed(4)}; between ${between.toFixed(4)}`,
      );
      expect(between).toBeGreaterThan(0);
      expect(between).toBeLessThan(nf4Gap);
    } finally {
      engine.destroy();
    }
  });
});
