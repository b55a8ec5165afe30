// Tensors larger than one storage binding are split, never refused: an engine that pretends to bind at most
// 16 KiB (WEBGPU_MAX_BINDING_BYTES) runs a causal LM whose 1000-row embedding (128 KiB) needs 8 windows, and must
// give what the unsplit engine gives — log-probs, entropies, full logits, every gradient and an AdamW step.
import { describe, it, expect, afterAll } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import {
  SPLIT_BYTES,
  SPLIT_MODEL_ROWS,
  randomSplitModelParameters,
  splitModelBatch,
  splitModelConfig,
} from '../support/split-model.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { Engine, readKnobs, type Arena } from '../../engine/index.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { matmul } from '../../kernels/matmul/matmul.ts';
import { lmHeadLogits } from '../../kernels/layers/lm-head.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { decodeOptimizerState, encodeOptimizerState } from '../../ppo/training/optimizer-state.ts';

const config = splitModelConfig;
const randomParameters = randomSplitModelParameters;
const { inputIds, attentionMask } = splitModelBatch;
const R = SPLIT_MODEL_ROWS;

interface Outputs {
  logprobs: Float32Array;
  entropy: Float32Array;
  logits: Float32Array;
  grads: Map<string, Float32Array>;
  updated: Map<string, Float32Array>;
  params: Arena;
  optimizer: AdamWOptimizer;
}

async function run(
  engine: Engine,
  values: Map<string, Float32Array>,
  stepGrads?: Map<string, Float32Array>,
): Promise<Outputs> {
  const params = createParameterArena(engine, config, 'split-test');
  uploadArenaTensors(engine, params, values);
  const lm = new CausalLm(engine, config, params);
  const random = seededRandom(9);
  const targets = new Uint32Array(R);
  const dLogprobs = new Float32Array(R);
  inputIds.forEach((row, b) =>
    row.forEach((_, t) => {
      targets[b * 7 + t] = row[t + 1] ?? 17;
      dLogprobs[b * 7 + t] = attentionMask[b][t] * (random() - 0.3);
    }),
  );
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize, 'split-test');
  const out = lm.tokenLogprobs(batch, engine.tensorFrom('targets', [R], targets, 'u32'), { saveForBackward: true });
  const logprobs = Float32Array.from(await engine.read(out.logprobs));
  const entropy = Float32Array.from(await engine.read(out.entropy));
  // Full logits of two rows (sampling's path): the (2, V) output fits one binding, the weight does not.
  const logitsOut = engine.tensor('logits', [2, config.vocabSize]);
  const hidden = engine.tensorFrom(
    'hidden',
    [2, config.hiddenSize],
    Array.from({ length: 2 * config.hiddenSize }, (_, i) => Math.sin(i)),
  );
  lmHeadLogits(engine, {
    hidden,
    weight: params.get('model.embed_tokens.weight'),
    out: logitsOut,
    N: 2,
    C: config.hiddenSize,
    V: config.vocabSize,
  });
  const logits = await engine.read(logitsOut);
  const optimizer = new AdamWOptimizer(engine, params, {
    lr: 1e-2,
    betas: [0.9, 0.95],
    eps: 1e-8,
    weightDecay: 0.1,
    maxGradNorm: 0.5,
  });
  optimizer.zeroGrad();
  lm.backward(
    engine.tensorFrom('dLogprobs', [R], dLogprobs),
    engine.tensorFrom(
      'dEntropy',
      [R],
      dLogprobs.map((g) => 0.3 * g),
    ),
    optimizer.grads,
  );
  const grads = new Map<string, Float32Array>();
  for (const name of params.names()) grads.set(name, await engine.read(optimizer.grads.get(name)));
  // The step starts from the same gradients on both engines (the unsplit engine's), so it tests AdamW's split alone.
  for (const [name, grad] of stepGrads ?? grads) engine.upload(optimizer.grads.get(name), grad);
  optimizer.step();
  const updated = new Map<string, Float32Array>();
  for (const name of params.names()) updated.set(name, await engine.read(params.get(name)));
  return { logprobs, entropy, logits, grads, updated, params, optimizer };
}

describe('tensors larger than one binding', () => {
  let split: Engine | null = null;
  afterAll(() => split?.destroy());

  it('a forced 16 KiB binding limit splits the embedding and matches the unsplit engine', async () => {
    const whole = await gpuEngine();
    split = await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES });
    expect(split.maxBindingBytes).toBe(SPLIT_BYTES);
    const values = randomParameters();
    const expected = await run(whole, values);
    const actual = await run(split, values, expected.grads);

    // The split really happened: the embedding has its own buffer, bound as 8 windows.
    const embeddingSlot = actual.params.layout.slots.find((s) => s.name === 'model.embed_tokens.weight')!;
    expect(actual.params.layout.segments.filter((s) => s.buffer === embeddingSlot.parts[0].buffer)).toHaveLength(8);
    expect(expected.params.layout.segments).toHaveLength(1);

    expectClose(actual.logprobs, expected.logprobs, 1e-6, 1e-5, 'logprobs');
    expectClose(actual.entropy, expected.entropy, 1e-6, 1e-5, 'entropy');
    expectClose(actual.logits, expected.logits, 1e-6, 1e-5, 'full logits');
    for (const [name, grad] of expected.grads)
      expectClose(actual.grads.get(name)!, grad, 1e-6, 1e-4, `gradient of ${name}`);
    for (const [name, value] of expected.updated)
      expectClose(actual.updated.get(name)!, value, 1e-7, 1e-6, `${name} after AdamW`);
  });

  it(
    'optimizer state saved on the unsplit engine resumes on the split one (moments stored per tensor, not per ' +
      'binding)',
    async () => {
      const whole = await gpuEngine();
      const values = randomParameters();
      const saved = await (await run(whole, values)).optimizer.saveState();
      const target = await run(split!, values);
      target.optimizer.loadState(
        decodeOptimizerState(encodeOptimizerState(saved), 'optimizer.safetensors', target.params.layout.slots),
      );
      const reloaded = await target.optimizer.saveState();
      expect(reloaded.step).toBe(1);
      for (const moments of ['m', 'v'] as const) {
        for (const [name, data] of saved[moments]) {
          expect(
            data.some((x) => x !== 0),
            `${moments} of ${name} is nonzero after a step`,
          ).toBe(true);
          expect(reloaded[moments].get(name), `${moments} of ${name}`).toEqual(data);
        }
      }
    },
  );

  it('binding a tensor above the limit whole is an error naming the kernel, the binding and the tensor', async () => {
    const engine = split!;
    const table = engine.tensor('big-table', [1000, 32]);
    const hidden = engine.tensor('hidden', [2, 32]);
    expect(() =>
      matmul(engine, { a: hidden, b: table, out: engine.tensor('out', [2, 1000]), M: 2, N: 1000, K: 32, layout: 'nt' }),
    ).toThrow(
      /kernel matmul\/.*binding b \(tensor big-table, \[1000, 32\]\) spans 128000 bytes but this device binds at most 16384 bytes/,
    );
  });
});
