// A decoder layer's MLP over windows of rows (models/mlp-chunks.ts): an engine that pretends to bind at most 24 KiB
// (WEBGPU_MAX_BINDING_BYTES) cannot bind the (R, 2I) gate/up activation of 96 tokens (48 KiB) whole, so the trunk
// runs gate/up, SwiGLU and down (and their backward, and the recomputation under gradient checkpointing) over two
// windows of 48 rows. Every op but the weight gradients is row-wise, and both windows and the whole batch use the
// same (tiled, > 32 rows) matmul kernel: the hidden states, the log-probs (of a forward that keeps nothing, as old
// log-probs and the reference run) and the gradients that flow through rows (every weight outside the MLP, the
// embedding's) must equal the unsplit engine's bit for bit; the MLP's weight gradients sum over rows in two pieces
// instead of one, so they agree to float rounding.
import { describe, it, expect, afterAll } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { Arena, Engine, readKnobs } from '../../engine/index.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { DecoderTrunk } from '../../models/decoder.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, resolveTargetModules, type LoraSettings } from '../../models/lora.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { mlpRowChunks } from '../../models/mlp-chunks.ts';

const SPLIT_BYTES = 24 * 1024;
const CONFIG = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 61,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: true,
});
const B = 2;
const T = 48;
const LORA: LoraSettings = {
  rank: 4,
  alpha: 8,
  targetModules: resolveTargetModules(['all-linear'], null, 'test'),
  useRslora: false,
};

const random = seededRandom(7);
const inputIds = Array.from({ length: B }, () => Array.from({ length: T }, () => Math.floor(random() * 61)));
const attentionMask = inputIds.map((row, b) => row.map((_, t) => (t >= 5 * b ? 1 : 0)));
const dFinal = Array.from({ length: B * T * CONFIG.hiddenSize }, () => random() - 0.5);

async function run(engine: Engine, checkpointing: boolean, lora: boolean, bf16 = false) {
  const adapterRandom = seededRandom(5);
  const params = createParameterArena(engine, CONFIG, 'chunks');
  uploadArenaTensors(engine, params, initialParameters(CONFIG, 3, 0.3));
  const trunk = new DecoderTrunk(engine, CONFIG, params);
  trunk.gradientCheckpointing = checkpointing;
  // Every entry random (B non-zero, as after training), so every adapter matrix gets a gradient.
  const values = new Map(
    [...initialLoraValues(CONFIG, LORA, 5)].map(([k, v]) => [k, v.map(() => 0.6 * (adapterRandom() - 0.5))]),
  );
  const adapters = lora ? new LoraAdapters(engine, CONFIG, LORA, values, 'chunks') : null;
  trunk.lora = adapters;
  if (bf16) trunk.setComputeDtype('bf16');
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, CONFIG.vocabSize, 'chunks');
  const hidden = await engine.read(trunk.forward(batch, { saveForBackward: true }));
  const grads = new Arena(engine, 'chunks.grads', (adapters?.params ?? params).layout);
  trunk.backward(engine.tensorFrom('chunks.dFinal', [B * T, CONFIG.hiddenSize], dFinal), grads);
  const byName = new Map<string, Float32Array>();
  for (const name of grads.names()) byName.set(name, await engine.read(grads.get(name)));
  // Old log-probs / reference: a forward that keeps nothing (two layers' buffers alternating) through the LM head.
  const lm = new CausalLm(engine, CONFIG, params);
  lm.trunk.lora = adapters;
  if (bf16) lm.trunk.setComputeDtype('bf16');
  const targets = engine.tensorFrom(
    'chunks.targets',
    [B * T],
    inputIds.flatMap((row) => [...row.slice(1), 0]),
    'u32',
  );
  const logprobs = await engine.read(lm.tokenLogprobs(batch, targets, { saveForBackward: false }).logprobs);
  return { hidden, grads: byName, logprobs };
}

describe('MLP row windows', () => {
  let split: Engine | null = null;
  afterAll(() => split?.destroy());

  it('the windows: one of all rows when (R, 2I) binds, else aligned windows that each bind', () => {
    expect(mlpRowChunks(96, [32, 128, 64], 48 * 1024, 256)).toEqual([{ first: 0, rows: 96 }]);
    expect(mlpRowChunks(96, [32, 128, 64], SPLIT_BYTES, 256)).toEqual([
      { first: 0, rows: 48 },
      { first: 48, rows: 48 },
    ]);
    // Rank-3 LoRA rows (12 B) start 256-byte aligned every 64 rows: windows are multiples of 64.
    expect(mlpRowChunks(200, [32, 128, 64, 3], 32 * 1024, 256)).toEqual([
      { first: 0, rows: 64 },
      { first: 64, rows: 64 },
      { first: 128, rows: 64 },
      { first: 192, rows: 8 },
    ]);
    expect(() => mlpRowChunks(200, [32, 128, 64, 3], SPLIT_BYTES, 256)).toThrow(/binding limit/);
  });

  const cases = [
    ...[false, true].flatMap((checkpointing) => [false, true].map((lora) => ({ checkpointing, lora, bf16: false }))),
    { checkpointing: true, lora: false, bf16: true },
  ];
  for (const { checkpointing, lora, bf16 } of cases) {
    it(`${lora ? 'LoRA' : 'full'}${bf16 ? ', bf16 compute' : ''}${checkpointing ? ', gradient checkpointing' : ''}: two windows under a 24 KiB binding give the unsplit trunk's hidden states, log-probs and gradients`, async () => {
      const whole = await gpuEngine();
      split ??= await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES });
      const count = async (engine: Engine) => {
        const before = engine.dispatchCount;
        const out = await run(engine, checkpointing, lora, bf16);
        return { ...out, dispatches: engine.dispatchCount - before };
      };
      const expected = await count(whole);
      const actual = await count(split);
      // The windows ran: the MLP's row-wise dispatches twice (and the LM head's vocabulary in narrower chunks).
      expect(actual.dispatches).toBeGreaterThan(expected.dispatches);
      expect(actual.hidden).toEqual(expected.hidden);
      expect(actual.logprobs).toEqual(expected.logprobs);
      let mlp = 0;
      for (const [name, g] of expected.grads) {
        expect(
          g.some((x) => x !== 0),
          name,
        ).toBe(true);
        if (/mlp|gate_up|down/.test(name)) {
          mlp++;
          const scale = Math.max(...g.map(Math.abs));
          expectClose(actual.grads.get(name)!, g, 1e-6 * scale, 1e-5, name);
        } else expect(actual.grads.get(name), name).toEqual(g);
      }
      expect(mlp).toBe(lora ? 2 * 2 * 2 : 2 * 2);
    });
  }
});
