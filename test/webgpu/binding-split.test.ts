// Tensors larger than one storage binding are split, never refused: an engine that pretends to bind at most
// 16 KiB (WEBGPU_MAX_BINDING_BYTES) runs a causal LM whose 1000-row embedding (128 KiB) needs 8 windows, and must
// give what the unsplit engine gives — log-probs, entropies, full logits, every gradient and an AdamW step.
import { describe, it, expect, afterAll } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { SPLIT_BYTES, randomSplitModelParameters, runSplitModel as run } from '../support/split-model.ts';
import { expectClose } from '../support/arrays.ts';
import { Engine, readKnobs } from '../../engine/index.ts';
import { transpose } from '../../kernels/util/transpose.ts';
import { decodeOptimizerState, encodeOptimizerState } from '../../ppo/training/optimizer-state.ts';

const randomParameters = randomSplitModelParameters;

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
    // transpose binds its input whole (layer weights above a binding are not transposed).
    expect(() => transpose(engine, { x: table, out: engine.tensor('t', [32, 1000]), rows: 1000, cols: 32 })).toThrow(
      /kernel transpose.*binding x \(tensor big-table, \[1000, 32\]\) spans 128000 bytes but this device binds at most 16384 bytes/,
    );
  });
});
