// The trunk's transposed weight copies (variant transposed-weights) are remade only when something has written the
// parameter arena since they were made: the micro-batches of a mini-batch share one set, and any write (an
// upload, an optimizer step, a copy into a weight) is seen by the next forward.
import { describe, it, expect, vi } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { seededRandom } from '../support/arrays.ts';
import { Arena, elementCount, type Engine, type KernelSpec } from '../../engine/index.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { parameterEntries } from '../../models/parameter-layout.ts';
import { DecoderTrunk } from '../../models/decoder.ts';
import { uploadTokenBatch, type TokenBatch } from '../../models/token-batch.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';

const CONFIG = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 23,
  hidden_size: 16,
  intermediate_size: 20,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: true,
});
/** 4 projections per layer. */
const TRANSPOSES_PER_REFRESH = 4 * CONFIG.numLayers;
const B = 2;
const T = 5;
const MICRO_BATCHES = 4;

function randomValues(seed: number): Map<string, Float32Array> {
  const random = seededRandom(seed);
  return new Map(
    parameterEntries(CONFIG).map((entry) => {
      const data = new Float32Array(elementCount(entry.shape));
      for (let i = 0; i < data.length; i++)
        data[i] = entry.name.includes('norm') ? 1 + 0.3 * (random() - 0.5) : 0.4 * (random() - 0.5);
      return [entry.name, data];
    }),
  );
}

function microBatch(engine: Engine, seed: number): TokenBatch {
  const random = seededRandom(seed);
  const inputIds = Array.from({ length: B }, () =>
    Array.from({ length: T }, () => 1 + Math.floor(random() * (CONFIG.vocabSize - 1))),
  );
  return uploadTokenBatch(
    engine,
    { inputIds, attentionMask: inputIds.map((row) => row.map(() => 1)) },
    CONFIG.vocabSize,
    `mb${seed}`,
  );
}

/** Runs `work` with the transposed weights forced (the CPU devices' choice, so the test means the same on a GPU),
 *  counting the transpose dispatches it records. */
async function withTransposedWeights<R>(
  engine: Engine,
  work: () => Promise<R>,
): Promise<{ result: R; transposes: number }> {
  engine.knobs.kernelVariants['transposed-weights'] = 'transposed';
  const dispatch = vi.spyOn(engine, 'dispatch');
  try {
    const result = await work();
    const transposes = dispatch.mock.calls.filter(([spec]) =>
      (spec as KernelSpec).name.startsWith('transpose/'),
    ).length;
    return { result, transposes };
  } finally {
    dispatch.mockRestore();
    delete engine.knobs.kernelVariants['transposed-weights'];
  }
}

describe('transposed weight copies follow the weight version', () => {
  it(
    'a mini-batch of 4 micro-batches transposes once and accumulates the same gradients bit for bit as a refresh ' +
      'per forward',
    async () => {
      const engine = await gpuEngine();
      const values = randomValues(7);
      const batches = Array.from({ length: MICRO_BATCHES }, (_, i) => microBatch(engine, 11 + i));
      const random = seededRandom(5);
      const dHidden = batches.map(() => Float32Array.from({ length: B * T * CONFIG.hiddenSize }, () => random() - 0.5));
      /** Gradients of the mini-batch; `rewriteWeights`: before each forward, upload the weights' own values again (a
       *  write that changes nothing), which forces the copies to be remade every time as before this change. */
      const miniBatch = (rewriteWeights: boolean) =>
        withTransposedWeights(engine, async () => {
          const params = createParameterArena(engine, CONFIG, `params-${rewriteWeights}`);
          uploadArenaTensors(engine, params, values);
          const grads = new Arena(engine, `grads-${rewriteWeights}`, params.layout);
          const trunk = new DecoderTrunk(engine, CONFIG, params);
          for (const [i, batch] of batches.entries()) {
            if (rewriteWeights) uploadArenaTensors(engine, params, values);
            trunk.forward(batch, { saveForBackward: true });
            trunk.backward(engine.tensorFrom(`dHidden${i}`, [B * T, CONFIG.hiddenSize], dHidden[i]), grads);
          }
          return Promise.all(params.names().map((name) => engine.read(grads.get(name))));
        });
      const once = await miniBatch(false);
      const everyTime = await miniBatch(true);
      expect(once.transposes).toBe(TRANSPOSES_PER_REFRESH);
      expect(everyTime.transposes).toBe(MICRO_BATCHES * TRANSPOSES_PER_REFRESH);
      once.result.forEach((grad, i) => expect(grad).toEqual(everyTime.result[i]));
    },
  );

  it('a forward after an upload, an optimizer step or a copy into a weight sees the new weights', async () => {
    const engine = await gpuEngine();
    const batch = microBatch(engine, 3);
    /** The trained trunk's hidden state against a fresh trunk's over a fresh arena holding the same weights. */
    const expectCurrentWeights = async (trunk: DecoderTrunk, what: string) => {
      const hidden = await engine.read(trunk.forward(batch, { saveForBackward: true }));
      const copy = createParameterArena(engine, CONFIG, `fresh-${what}`);
      for (const name of copy.names()) engine.copy(trunk.params.get(name), copy.get(name));
      const fresh = await engine.read(new DecoderTrunk(engine, CONFIG, copy).forward(batch, { saveForBackward: true }));
      expect(hidden, what).toEqual(fresh);
      return hidden;
    };
    const { transposes } = await withTransposedWeights(engine, async () => {
      const params = createParameterArena(engine, CONFIG, 'params-writes');
      uploadArenaTensors(engine, params, randomValues(1));
      const trunk = new DecoderTrunk(engine, CONFIG, params);
      const first = await expectCurrentWeights(trunk, 'first forward');

      uploadArenaTensors(engine, params, randomValues(2));
      const uploaded = await expectCurrentWeights(trunk, 'after an upload');
      expect(uploaded).not.toEqual(first);

      const optimizer = new AdamWOptimizer(engine, params, {
        lr: 0.05,
        betas: [0.9, 0.99],
        eps: 1e-8,
        weightDecay: 0,
        maxGradNorm: 0,
      });
      optimizer.zeroGrad();
      trunk.backward(
        engine.tensorFrom('dHidden', [B * T, CONFIG.hiddenSize], new Float32Array(B * T * CONFIG.hiddenSize).fill(0.1)),
        optimizer.grads,
      );
      await optimizer.step();
      const stepped = await expectCurrentWeights(trunk, 'after an optimizer step');
      expect(stepped).not.toEqual(uploaded);

      const other = createParameterArena(engine, CONFIG, 'params-other');
      uploadArenaTensors(engine, other, randomValues(3));
      const name = 'model.layers.1.mlp.down_proj.weight';
      engine.copy(other.get(name), params.get(name));
      const copied = await expectCurrentWeights(trunk, 'after a copy into one weight');
      expect(copied).not.toEqual(stepped);
    });
    // Each fresh trunk makes its own copies once; the trained one remakes them after each of the three writes.
    expect(transposes).toBe(8 * TRANSPOSES_PER_REFRESH);
  });
});
