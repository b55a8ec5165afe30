// `node tools/bench.js storage [--rounds=N] [--layers=N] [--steps=N]`: what the frozen LoRA base's storage and the
// rollout's dtype cost in time on this device, as ratios measured in one run: the rollout's generated tokens/s
// (timing_s/gen, prefill included) and the PPO step's seconds (timing_s/step), LoRA r=8 on a float32 base, the
// checkpoint's bf16 base, a float32 base generating with rollout.dtype=bfloat16, NF4 (load_in_4bit), NF4 with
// double-quantized scales (use_bnb_nested_quant) and int8 (load_in_8bit); and the float32 base multiplied by the
// kernels the others take (AS_STORED), which parts what a storage costs from what its kernel path costs. One
// process and one engine (pipelines compile once), the variants' runs interleaved round by round so a busy machine
// slows each alike; each run's first step (allocation, and compilation in the first round) is left out. The model
// has Qwen3-0.6B's layer (hidden 1,024, 16 heads, 8 KV heads of 128, intermediate 3,072), `--layers` of them (1), a
// bf16 checkpoint, and the arithmetic task's small vocabulary, so the layers' matmuls are the time, as in a real
// model, not a 151,936-row LM head; GRPO, 4 prompts × 2 samples of up to 24 tokens.
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { saveModel } from '../../models/model-files-node.ts';
import { arithmeticDataset, arithmeticTokenizer, arithmeticTokenizerFiles } from '../../ppo/tasks/arithmetic.ts';
import { loadConfig } from '../../ppo/config.ts';
import { PpoRun } from '../../ppo/jobs/ppo-run-node.ts';
import { integerFlag, median } from './harness.ts';

/** The kernel choices of a base that is not float32 (models/weight-operand.ts), forced on a float32 one: CPU devices
 *  otherwise multiply float32 weights through transposed copies and fused decode matmuls, which the other storages
 *  skip (the copies would be float32), so this variant parts the storage's own cost from the path's. */
const AS_STORED = {
  'transposed-weights': 'as-stored',
  'decode-weights': 'as-stored',
  'matmul-prologue': 'separate',
};

const FP32 = 'actor_rollout_ref.actor.fsdp_config.model_dtype=fp32';

const VARIANTS: readonly [string, readonly string[], Record<string, string>?][] = [
  ['fp32 base', [FP32]],
  ['fp32 base, kernels as stored', [FP32], AS_STORED],
  ['bf16 base', []],
  ['fp32 base, rollout bf16', [FP32, 'actor_rollout_ref.rollout.dtype=bfloat16']],
  ['nf4 base', ['actor_rollout_ref.model.load_in_4bit=true']],
  [
    'nf4 base, nested',
    ['actor_rollout_ref.model.load_in_4bit=true', 'actor_rollout_ref.model.use_bnb_nested_quant=true'],
  ],
  ['int8 base', ['actor_rollout_ref.model.load_in_8bit=true']],
];

const PROMPTS = 4;
const SAMPLES = 2;

export interface StorageBenchRow {
  variant: string;
  steps: number;
  gen_tokens_per_s: number;
  step_s: number;
  /** Process CPU seconds of a whole run (load, quantization, every step), rounds after the first (which compiles
   *  the pipelines): lavapipe's threads are this process's, so unlike wall time it barely moves when other
   *  processes share the cores. */
  run_cpu_s: number;
  /** This variant's tokens/s over the float32 base's, and its step seconds and run CPU over the float32 base's. */
  gen_vs_fp32: number;
  step_vs_fp32: number;
  cpu_vs_fp32: number;
}

export async function benchmarkStorage(engine: Engine, argv: string[]): Promise<StorageBenchRow[]> {
  const rounds = integerFlag(argv, 'rounds', 3);
  const layers = integerFlag(argv, 'layers', 1);
  const steps = integerFlag(argv, 'steps', 2);
  const root = mkdtempSync(join(tmpdir(), 'bench-storage-'));
  try {
    const model = join(root, 'model');
    const config = tinyQwen3Config(arithmeticTokenizer.vocabSize, {
      layers,
      hidden: 1024,
      heads: 16,
      kvHeads: 8,
      headDim: 128,
      intermediate: 3072,
    });
    const params = createParameterArena(engine, config, 'bench-storage');
    uploadArenaTensors(engine, params, initialParameters(config, 1));
    await saveModel(engine, model, config, params, { dtype: 'bfloat16' });
    for (const buffer of params.buffers) engine.destroyTensor(buffer);
    const files = arithmeticTokenizerFiles();
    await writeFile(join(model, 'tokenizer.json'), JSON.stringify(files.tokenizerJson));
    await writeFile(join(model, 'tokenizer_config.json'), JSON.stringify(files.tokenizerConfig));
    const data = join(root, 'train.jsonl');
    const { train } = arithmeticDataset({ digits: 2, trainSize: PROMPTS * steps, valSize: 0, seed: 3 });
    await writeFile(data, `${train.map((r) => JSON.stringify(r.row)).join('\n')}\n`);
    const common = [
      `actor_rollout_ref.model.path=${model}`,
      `data.train_files=${data}`,
      `data.train_batch_size=${PROMPTS}`,
      'data.max_prompt_length=16',
      'data.max_response_length=24',
      'algorithm.adv_estimator=grpo',
      `actor_rollout_ref.rollout.n=${SAMPLES}`,
      'actor_rollout_ref.model.lora_rank=8',
      'actor_rollout_ref.actor.use_kl_loss=true',
      `actor_rollout_ref.actor.ppo_mini_batch_size=${PROMPTS}`,
      `trainer.total_training_steps=${steps}`,
      'trainer.val_before_train=false',
      'trainer.test_freq=-1',
      'trainer.save_freq=-1',
      'trainer.logger=[file]',
    ];
    const measured = new Map<string, { tokensPerS: number[]; stepS: number[]; cpuS: number[] }>(
      VARIANTS.map(([name]) => [name, { tokensPerS: [], stepS: [], cpuS: [] }]),
    );
    for (let round = 0; round < rounds; round++) {
      for (const [name, keys, variants = {}] of VARIANTS) {
        const dir = join(root, `run-${round}-${name.replace(/[^a-z0-9]+/g, '-')}`);
        const overrides = [...common, ...keys, `trainer.default_local_dir=${dir}`];
        const run = new PpoRun(engine, loadConfig({ overrides }), {
          env: process.env,
          resumeCommand: `node train.js ${overrides.join(' ')}`,
        });
        const chosen = { ...engine.knobs.kernelVariants };
        Object.assign(engine.knobs.kernelVariants, variants);
        const cpu = process.cpuUsage();
        const code = await run.run([]).finally(() => {
          engine.knobs.kernelVariants = chosen;
        });
        const used = process.cpuUsage(cpu);
        if (round > 0) measured.get(name)!.cpuS.push((used.user + used.system) / 1e6);
        if (code !== 0) throw new Error(`storage bench: the ${name} run exited with ${code}`);
        const lines = (await readFile(join(dir, 'metrics.jsonl'), 'utf8')).trim().split('\n');
        for (const line of lines.slice(1)) {
          const m = JSON.parse(line).data as Record<string, number>;
          const tokens = m['response_length/mean'] * PROMPTS * SAMPLES;
          measured.get(name)!.tokensPerS.push(tokens / m['timing_s/gen']);
          measured.get(name)!.stepS.push(m['timing_s/step']);
        }
      }
    }
    const rows = VARIANTS.map(([name]) => {
      const { tokensPerS, stepS, cpuS } = measured.get(name)!;
      return {
        variant: name,
        steps: stepS.length,
        gen_tokens_per_s: median(tokensPerS),
        step_s: median(stepS),
        run_cpu_s: cpuS.length > 0 ? median(cpuS) : Number.NaN,
      };
    });
    return rows.map((row) => ({
      ...row,
      gen_vs_fp32: row.gen_tokens_per_s / rows[0].gen_tokens_per_s,
      step_vs_fp32: row.step_s / rows[0].step_s,
      cpu_vs_fp32: row.run_cpu_s / rows[0].run_cpu_s,
    }));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
