// A separate reference (actor_rollout_ref.ref.load_in_4bit / load_in_8bit) and a reward model
// (reward_model.model.load_in_4bit / load_in_8bit) stored in NF4 (its block scales double-quantized with
// use_bnb_nested_quant) or int8 as a LoRA base is. The quantized model
// computes the float32 model holding the dequantized weights: the kernels unpack each weight to that float32 value
// before any arithmetic, so with the same kernels on both sides (the float32-only paths — transposed copies, matmul
// prologues — switched off) the log-probs and scores agree bit for bit. Through `node train.js` each key runs a step,
// the memory plan prints the storage, and the reference's KL to the float32 actor is not 0 at the first update (the
// reference really is quantized).
import { describe, it, expect, afterAll } from 'vitest';
import { join } from 'node:path';
import { Engine, readKnobs, type Arena } from '../../engine/index.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { ValueModel } from '../../models/value-model.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import {
  createParameterArena,
  readHfTensors,
  storedParameterCopy,
  uploadHfTensors,
} from '../../models/parameter-store.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import { makeTinyRun, runMetrics, saveTinyModel } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';

/** The float32-only paths off, so both models dispatch the same kernels in the same order. */
const SAME_KERNELS = readKnobs({
  ...process.env,
  WEBGPU_KERNEL_VARIANTS: 'transposed-weights:as-stored,decode-weights:as-stored,matmul-prologue:separate',
});

// Double-quantized scales need every fused q/k/v, gate/up part but the last to be whole 256-blocks of NF4 blocks: the
// tiny run's q_proj [32, 32] is not, a hidden-128 model with four KV heads is.
const WIDE = { hidden: 128, heads: 4, kvHeads: 4, headDim: 32, intermediate: 128 };

const STORAGES = [
  { storage: 'nf4', keys: ['load_in_4bit'], wide: false },
  { storage: 'int8', keys: ['load_in_8bit'], wide: false },
  { storage: 'nf4-nested', keys: ['load_in_4bit', 'use_bnb_nested_quant'], wide: true },
] as const;

/** The tiny run's model directory, or the wide one saved beside it. */
async function modelFor(root: string, wide: boolean): Promise<string> {
  if (!wide) return join(root, 'model');
  const dir = join(root, 'model-wide');
  await saveTinyModel(dir, 'arithmetic', 5, WIDE);
  return dir;
}

const inputIds = [
  [1, 5, 7, 2, 9, 4, 3, 8],
  [6, 2, 2, 9, 1, 0, 0, 0],
];
const attentionMask = inputIds.map((row, b) => row.map((_, t) => (b === 1 && t >= 5 ? 0 : 1)));

/** A float32 arena holding the values `quantized` dequantizes to (read back through the host, as a save does). */
async function dequantizedCopy(engine: Engine, config: DecoderConfig, quantized: Arena): Promise<Arena> {
  const values = await readHfTensors(engine, quantized, config);
  const params = createParameterArena(engine, config, 'dequantized', 'f32');
  uploadHfTensors(engine, params, config, (name) => values.get(name), 'dequantized');
  return params;
}

function withoutTimings(metrics: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(metrics).filter(([key]) => !key.startsWith('timing_s/') && !key.startsWith('perf/')),
  );
}

describe('a frozen reference or reward model in NF4 or int8', () => {
  let engine: Engine | null = null;
  afterAll(() => engine?.destroy());

  for (const { storage, wide } of STORAGES) {
    it(`${storage}: the reference's log-probs and the reward model's scores are the float32 model's over the dequantized weights, bit for bit`, async () => {
      engine ??= await Engine.create(SAME_KERNELS);
      const { root } = await makeTinyRun();
      const model = await modelFor(root, wide);
      const actor = await loadModel(engine, model);
      const reference = await storedParameterCopy(engine, actor.config, actor.params, 'reference', storage);
      expect(reference.dtypeOf('model.layers.0.mlp.gate_up_proj.weight')).toBe('u32');
      const exact = await dequantizedCopy(engine, actor.config, reference);
      const R = inputIds.length * inputIds[0].length;
      const targets = Uint32Array.from({ length: R }, (_, i) => (i * 7) % actor.config.vocabSize);
      const logProbs = async (params: Arena) => {
        const lm = new CausalLm(engine!, actor.config, params);
        const batch = uploadTokenBatch(engine!, { inputIds, attentionMask }, actor.config.vocabSize);
        const out = lm.tokenLogprobs(batch, engine!.tensorFrom('targets', [R], targets, 'u32'), {
          saveForBackward: false,
        });
        return [...(await engine!.read(out.logprobs))];
      };
      const [quantized, dequantized, full] = [
        await logProbs(reference),
        await logProbs(exact),
        await logProbs(actor.params),
      ];
      expect(quantized).toEqual(dequantized);
      // And the quantization really moved them (else the comparison above would prove nothing about the path).
      expect(quantized).not.toEqual(full);

      // The reward model: the tiny model with a score head (float32, never quantized).
      const rm = await loadModel(engine, model, { as: 'sequence-classification', seed: 3 });
      const rmConfig = { ...rm.config, padTokenId: 0 };
      const rmQuantized = await storedParameterCopy(engine, rmConfig, rm.params, 'reward_model', storage);
      expect(rmQuantized.dtypeOf('score.weight')).toBe('f32');
      const scores = async (params: Arena) =>
        new ValueModel(engine!, rmConfig, params).sequenceScores(
          uploadTokenBatch(engine!, { inputIds, attentionMask }, rmConfig.vocabSize),
          attentionMask,
        );
      const [rmScores, rmExact, rmFull] = [
        await scores(rmQuantized),
        await scores(await dequantizedCopy(engine, rmConfig, rmQuantized)),
        await scores(rm.params),
      ];
      expect(rmScores).toEqual(rmExact);
      expect(rmScores).not.toEqual(rmFull);
    });
  }
});

describe('quantized frozen models from the command line', () => {
  for (const { storage, keys, wide } of STORAGES) {
    it(`actor_rollout_ref.ref.${keys.join(', ')} and reward.reward_model.* (verl HEAD's tree): two steps run, and a resumed run repeats them`, async () => {
      const { root, overrides } = await makeTinyRun();
      const model = await modelFor(root, wide);
      // A reward model to load: the tiny model with a score head, saved as a user's checkpoint would be.
      const rmDir = join(root, 'reward-model');
      const engine = await Engine.create();
      try {
        const rm = await loadModel(engine, model, { as: 'sequence-classification', seed: 3 });
        await saveModel(engine, rmDir, { ...rm.config, padTokenId: 0 }, rm.params, { tokenizerFrom: model });
      } finally {
        engine.destroy();
      }
      const run = async (name: string, extra: string[] = []) => {
        const dir = join(root, name);
        const printed = await runCli([
          ...overrides,
          `actor_rollout_ref.model.path=${model}`,
          'trainer.logger=[console,file]',
          'trainer.total_training_steps=2',
          'trainer.save_freq=1',
          // float32 saves, so the trained critic resumes exactly.
          'trainer.save_dtype=float32',
          `trainer.default_local_dir=${dir}`,
          'actor_rollout_ref.actor.use_kl_loss=true',
          'actor_rollout_ref.actor.ppo_mini_batch_size=4',
          ...keys.map((key) => `actor_rollout_ref.ref.${key}=true`),
          'reward.reward_model.enable=true',
          `reward.reward_model.model_path=${rmDir}`,
          ...keys.map((key) => `reward.reward_model.${key}=true`),
          ...extra,
        ]);
        expect(printed.code, printed.stderr).toBe(0);
        return { stdout: printed.stdout, metrics: (await runMetrics(dir)).map((m) => withoutTimings(m.data)) };
      };
      const { stdout, metrics } = await run('run');
      expect(stdout).toMatch(new RegExp(`reference parameters \\(${storage} layer matrices, f32 embedding\\)`));
      expect(stdout).toMatch(new RegExp(`reward model parameters \\(${storage} layer matrices, f32 embedding\\)`));
      const update = metrics.find((m) => m['actor/kl_loss'] !== undefined)!;
      // One mini-batch: the first KL is measured before any update, so it is the quantization's alone.
      expect(update['actor/kl_loss']).not.toBe(0);
      expect(Number.isFinite(update['actor/kl_loss'])).toBe(true);
      expect(Number.isFinite(update['critic/score/mean'])).toBe(true);
      // Stopped after step 1 and resumed (reference and reward model quantized again from their checkpoints): step 2
      // as in one run.
      await run('resumed', ['trainer.total_training_steps=1']);
      expect((await run('resumed')).metrics).toEqual(metrics);
    });
  }
});
