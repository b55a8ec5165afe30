// The trunk's row-wise ops over windows of rows (models/row-chunks.ts): an engine that pretends to bind at most 32 KiB
// (WEBGPU_MAX_BINDING_BYTES) cannot bind whole the residual stream (R, C) of 256 tokens (64 KiB), nor the MLP's
// (R, 2I) (128 KiB). So everything but attention — the embedding, the norms, the projections, RoPE, the LM and value
// heads, and their backward and recomputation — runs over two windows of 128 rows, and the MLP over four of 64;
// attention binds the micro-batch's fused qkv (R, W), which this model (hidden 64 wider than its qkv 32) keeps within
// the binding. Every op but the weight gradients is row-wise, and windows and the whole batch use the same (tiled,
// > 32 rows) matmul kernel: hidden states, log-probs, entropies and a critic's values must equal the unsplit engine's
// bit for bit. Every weight gradient sums over rows, in two or four float32 partial sums instead of one pass, so they
// agree to float rounding.
import { describe, it, expect, afterAll } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { Arena, Engine, readKnobs } from '../../engine/index.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { qkvWidth } from '../../models/parameter-layout.ts';
import { DecoderTrunk } from '../../models/decoder.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { ValueModel } from '../../models/value-model.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, resolveTargetModules, type LoraSettings } from '../../models/lora.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { rowChunks } from '../../models/row-chunks.ts';
import { attentionWindowRows } from '../../models/attention-windows.ts';

const SPLIT_BYTES = 32 * 1024;
const SHAPE = {
  vocab_size: 61,
  hidden_size: 64,
  intermediate_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
};
const CONFIG = parseHfConfig({ architectures: ['Qwen3ForCausalLM'], tie_word_embeddings: true, ...SHAPE });
const CRITIC = parseHfConfig({ architectures: ['Qwen3ForTokenClassification'], num_labels: 1, ...SHAPE });
/** Layer weights within 16 KiB (gate/up 64 × 64 floats), so only activations are windowed under that binding. */
const NARROW = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  tie_word_embeddings: true,
  ...SHAPE,
  intermediate_size: 32,
});
const NARROW_CRITIC = parseHfConfig({
  architectures: ['Qwen3ForTokenClassification'],
  num_labels: 1,
  ...SHAPE,
  intermediate_size: 32,
});
const B = 2;
const T = 128;
const R = B * T;
const LORA: LoraSettings = {
  rank: 4,
  alpha: 8,
  targetModules: resolveTargetModules(['all-linear'], null, 'test'),
  useRslora: false,
};

const random = seededRandom(7);
const inputIds = Array.from({ length: B }, () => Array.from({ length: T }, () => Math.floor(random() * 61)));
const attentionMask = inputIds.map((row, b) => row.map((_, t) => (t >= 5 * b ? 1 : 0)));
const dFinal = Array.from({ length: R * CONFIG.hiddenSize }, () => random() - 0.5);
const dValues = Array.from({ length: R }, () => random() - 0.5);

async function readGrads(engine: Engine, grads: Arena): Promise<Map<string, Float32Array>> {
  const byName = new Map<string, Float32Array>();
  for (const name of grads.names()) byName.set(name, await engine.read(grads.get(name)));
  return byName;
}

async function run(engine: Engine, checkpointing: boolean, lora: boolean, bf16 = false, config = CONFIG) {
  const adapterRandom = seededRandom(5);
  const params = createParameterArena(engine, config, 'rows');
  uploadArenaTensors(engine, params, initialParameters(config, 3, 0.3));
  const trunk = new DecoderTrunk(engine, config, params);
  trunk.gradientCheckpointing = checkpointing;
  // Every entry random (B non-zero, as after training), so every adapter matrix gets a gradient.
  const values = new Map(
    [...initialLoraValues(config, LORA, 5)].map(([k, v]) => [k, v.map(() => 0.6 * (adapterRandom() - 0.5))]),
  );
  const adapters = lora ? new LoraAdapters(engine, config, LORA, values, 'rows') : null;
  trunk.lora = adapters;
  if (bf16) trunk.setComputeDtype('bf16');
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize, 'rows');
  const hidden = await engine.read(trunk.forward(batch, { saveForBackward: true }));
  const grads = new Arena(engine, 'rows.grads', (adapters?.params ?? params).layout);
  trunk.backward(engine.tensorFrom('rows.dFinal', [R, config.hiddenSize], dFinal), grads);
  // Old log-probs / reference: a forward that keeps nothing (two layers' buffers alternating) through the LM head.
  const lm = new CausalLm(engine, config, params);
  lm.trunk.lora = adapters;
  if (bf16) lm.trunk.setComputeDtype('bf16');
  const targets = engine.tensorFrom(
    'rows.targets',
    [R],
    inputIds.flatMap((row) => [...row.slice(1), 0]),
    'u32',
  );
  const head = lm.tokenLogprobs(batch, targets, { saveForBackward: false });
  return {
    hidden,
    grads: await readGrads(engine, grads),
    logprobs: await engine.read(head.logprobs),
    entropy: await engine.read(head.entropy),
  };
}

/** A full critic's values, and its gradients of Σ dValues·values (the critic update). */
async function critic(engine: Engine, config = CRITIC) {
  const params = createParameterArena(engine, config, 'rows.critic');
  uploadArenaTensors(engine, params, initialParameters(config, 4, 0.3));
  const model = new ValueModel(engine, config, params);
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize, 'rows.critic');
  const values = await engine.read(model.tokenValues(batch, { saveForBackward: true }));
  const grads = new Arena(engine, 'rows.critic.grads', params.layout);
  model.backward(engine.tensorFrom('rows.dValues', [R], dValues), grads);
  return { values, grads: await readGrads(engine, grads) };
}

/** The actor update's gradients with sparse logit-gradient pairs (on-policy distillation's top-k terms, P = 2 a
 *  row) added to the LM head's; `pairs: false` leaves them out. */
async function distill(engine: Engine, pairs = true) {
  const pairRandom = seededRandom(11);
  const params = createParameterArena(engine, CONFIG, 'rows.distill');
  uploadArenaTensors(engine, params, initialParameters(CONFIG, 3, 0.3));
  const lm = new CausalLm(engine, CONFIG, params);
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, CONFIG.vocabSize, 'rows.distill');
  const targets = engine.tensorFrom('rows.distill.targets', [R], inputIds.flat(), 'u32');
  lm.tokenLogprobs(batch, targets, { saveForBackward: true });
  const grads = new Arena(engine, 'rows.distill.grads', params.layout);
  const extra = {
    ids: engine.tensorFrom(
      'rows.distill.ids',
      [R, 2],
      Array.from({ length: 2 * R }, () => Math.floor(pairRandom() * CONFIG.vocabSize)),
      'u32',
    ),
    coefs: engine.tensorFrom(
      'rows.distill.coefs',
      [R, 2],
      Array.from({ length: 2 * R }, () => pairRandom() - 0.5),
    ),
    P: 2,
  };
  lm.backward(engine.tensorFrom('rows.distill.dLogprobs', [R], dValues), null, grads, pairs ? extra : null);
  return readGrads(engine, grads);
}

/** Every gradient non-zero on the unsplit engine, and the split engine's within float rounding of a re-ordered sum. */
function expectSameGradients(actual: Map<string, Float32Array>, expected: Map<string, Float32Array>): void {
  for (const [name, g] of expected) {
    expect(
      g.some((x) => x !== 0),
      name,
    ).toBe(true);
    const scale = Math.max(...g.map(Math.abs));
    expectClose(actual.get(name)!, g, 2e-6 * scale, 1e-5, name);
  }
}

describe('trunk row windows', () => {
  let split: Engine | null = null;
  afterAll(() => split?.destroy());
  const splitEngine = async () => (split ??= await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES }));
  const count = async <T>(engine: Engine, body: (engine: Engine) => Promise<T>) => {
    const before = engine.dispatchCount;
    const out = await body(engine);
    return { ...out, dispatches: engine.dispatchCount - before };
  };

  it('the windows: one of all rows when every row-wise tensor binds, else aligned windows that each bind', () => {
    expect(rowChunks(96, [32, 128, 64, 1], 48 * 1024, 256)).toEqual([{ first: 0, rows: 96 }]);
    // One-word rows (the norms' rstd, the token ids) start 256-byte aligned every 64 rows.
    expect(rowChunks(R, [64, 32, 128, 64, 1], SPLIT_BYTES, 256)).toEqual(
      [0, 64, 128, 192].map((first) => ({ first, rows: 64 })),
    );
    // Rank-3 LoRA rows (12 B) start 256-byte aligned every 64 rows: windows are multiples of 64.
    expect(rowChunks(200, [32, 128, 64, 3], 32 * 1024, 256)).toEqual([
      { first: 0, rows: 64 },
      { first: 64, rows: 64 },
      { first: 128, rows: 64 },
      { first: 192, rows: 8 },
    ]);
    expect(() => rowChunks(200, [32, 128, 64, 1], 24 * 1024, 256)).toThrow(/binding limit/);
  });

  it('a binding that just holds the widest row-wise tensor and the fused qkv: the unsplit schedule, dispatch for dispatch', async () => {
    const whole = await gpuEngine();
    const exact = await Engine.create({ ...readKnobs(), maxBindingBytes: R * 2 * CONFIG.intermediateSize * 4 });
    try {
      expect(R * qkvWidth(CONFIG) * 4).toBeLessThan(exact.maxBindingBytes);
      const expected = await count(whole, (e) => run(e, false, false));
      const actual = await count(exact, (e) => run(e, false, false));
      expect(actual.dispatches).toBe(expected.dispatches);
      expect(actual.hidden).toEqual(expected.hidden);
    } finally {
      exact.destroy();
    }
  });

  const cases = [
    ...[false, true].flatMap((checkpointing) => [false, true].map((lora) => ({ checkpointing, lora, bf16: false }))),
    { checkpointing: true, lora: false, bf16: true },
    { checkpointing: false, lora: false, bf16: true },
  ];
  for (const { checkpointing, lora, bf16 } of cases) {
    it(`${lora ? 'LoRA' : 'full'}${bf16 ? ', bf16 compute' : ''}${checkpointing ? ', gradient checkpointing' : ''}: windows under a 32 KiB binding give the unsplit trunk's hidden states, log-probs, entropies and gradients`, async () => {
      const whole = await gpuEngine();
      const expected = await count(whole, (e) => run(e, checkpointing, lora, bf16));
      const actual = await count(await splitEngine(), (e) => run(e, checkpointing, lora, bf16));
      // The windows ran: the row-wise dispatches two or four times over.
      expect(actual.dispatches).toBeGreaterThan(expected.dispatches);
      expect(actual.hidden).toEqual(expected.hidden);
      expect(actual.logprobs).toEqual(expected.logprobs);
      expect(actual.entropy).toEqual(expected.entropy);
      expectSameGradients(actual.grads, expected.grads);
      expect(actual.grads.size).toBe(lora ? 2 * 4 * 2 : 2 * 8 + 2);
    });
  }

  it("the LM head's sparse logit gradients (on-policy distillation) over windows", async () => {
    const whole = await gpuEngine();
    const expected = await distill(whole);
    expectSameGradients(await distill(await splitEngine()), expected);
    // The pairs count: without them the tied embedding's gradient differs.
    const without = await distill(whole, false);
    expect(without.get('model.embed_tokens.weight')).not.toEqual(expected.get('model.embed_tokens.weight'));
  });

  it("a critic's values and gradients over windows", async () => {
    const whole = await gpuEngine();
    const expected = await count(whole, critic);
    const actual = await count(await splitEngine(), critic);
    expect(actual.dispatches).toBeGreaterThan(expected.dispatches);
    expect(actual.values).toEqual(expected.values);
    expectSameGradients(actual.grads, expected.grads);
  });

  describe('attention over windows of each sequence (models/attention-windows.ts)', () => {
    // Under 16 KiB the micro-batch's q/k/v (R, W = 32) is 32 KiB: each sequence's queries run in two windows of 64
    // rows against its keys and values gathered into (R, 8) copies (4 KiB a sequence); dk, dv of the first key window
    // sum its two query windows. A query attends the same keys in the same kernel as unwindowed, so hidden states,
    // log-probs, entropies and values are the unsplit engine's bit for bit where the kernel splits a query's keys
    // the same way for a shorter block of queries (the register passes on lavapipe); gradients sum over rows and
    // over query windows in another order, so they agree to float rounding.
    let attention: Engine | null = null;
    afterAll(() => attention?.destroy());
    const BINDING = 16 * 1024;
    const engine = async () => (attention ??= await Engine.create({ ...readKnobs(), maxBindingBytes: BINDING }));

    it('the windows: none where q/k/v binds, else multiples of 64 rows; one sequence whose keys cannot bind is one line', () => {
      expect(attentionWindowRows(NARROW, B, T, 32 * 1024, 256)).toBe(null);
      expect(attentionWindowRows(NARROW, B, T, BINDING, 256)).toBe(64);
      // 8 floats of keys a token: 1,024 tokens and the alignment slack are above 12 KiB.
      expect(() => attentionWindowRows(NARROW, 1, 1024, 12 * 1024, 256)).toThrow(
        /one sequence's keys \(1024 tokens × 8 floats\) are above the 12288-byte binding limit, which holds 376 tokens/,
      );
    });

    for (const { checkpointing, lora, bf16 } of cases) {
      it(`${lora ? 'LoRA' : 'full'}${bf16 ? ', bf16 compute' : ''}${checkpointing ? ', gradient checkpointing' : ''}: the unsplit trunk's hidden states, log-probs, entropies and gradients`, async () => {
        const whole = await gpuEngine();
        const expected = await count(whole, (e) => run(e, checkpointing, lora, bf16, NARROW));
        const actual = await count(await engine(), (e) => run(e, checkpointing, lora, bf16, NARROW));
        expect(actual.dispatches).toBeGreaterThan(expected.dispatches);
        expect(actual.hidden).toEqual(expected.hidden);
        expect(actual.logprobs).toEqual(expected.logprobs);
        expect(actual.entropy).toEqual(expected.entropy);
        expectSameGradients(actual.grads, expected.grads);
        expect(actual.grads.size).toBe(lora ? 2 * 4 * 2 : 2 * 8 + 2);
      });
    }

    it("a critic's values and gradients", async () => {
      const whole = await gpuEngine();
      const expected = await critic(whole, NARROW_CRITIC);
      const actual = await critic(await engine(), NARROW_CRITIC);
      expect(actual.values).toEqual(expected.values);
      expectSameGradients(actual.grads, expected.grads);
    });
  });
});
