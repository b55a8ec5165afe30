// The trunk's row-wise ops over windows of rows (models/row-chunks.ts): an engine that pretends to bind at most 32 KiB
// (WEBGPU_MAX_BINDING_BYTES) cannot bind whole the residual stream (R, C) of 256 tokens (64 KiB), nor the MLP's
// (R, 2I) (128 KiB). So everything but attention — the embedding, the norms, the projections, RoPE, the LM and value
// heads, and their backward and recomputation — runs over two windows of 128 rows, and the MLP over four of 64;
// attention binds the micro-batch's fused qkv (R, W), which this model (hidden 64 wider than its qkv 32) keeps within
// the binding. Every op but the weight gradients is row-wise, and windows and the whole batch use the same (tiled,
// > 32 rows) matmul kernel: hidden states, log-probs, entropies and a critic's values must equal the unsplit engine's
// bit for bit. Every weight gradient sums over rows, in two or four float32 partial sums instead of one pass, so they
// agree to float rounding.
import { describe, it, expect, afterAll, vi } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, seededRandom } from '../support/arrays.ts';
import { Arena, Engine, readKnobs } from '../../engine/index.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
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
import { attentionWindowRows, keyWindowRows } from '../../models/attention-windows.ts';
import { forwardKlTopkGpu } from '../../kernels/ppo/forward-kl-topk.ts';

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

/** A micro-batch: token ids and attention mask (B, T) and the gradient of the trunk's output (B·T, C). */
interface Tokens {
  inputIds: number[][];
  attentionMask: number[][];
  dFinal: number[];
}

async function run(
  engine: Engine,
  checkpointing: boolean,
  lora: boolean,
  bf16 = false,
  config = CONFIG,
  tokens: Tokens = { inputIds, attentionMask, dFinal },
) {
  const R = tokens.inputIds.length * tokens.inputIds[0].length;
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
  const batch = uploadTokenBatch(engine, tokens, config.vocabSize, 'rows');
  const hidden = await engine.read(trunk.forward(batch, { saveForBackward: true }));
  const grads = new Arena(engine, 'rows.grads', (adapters?.params ?? params).layout);
  trunk.backward(engine.tensorFrom('rows.dFinal', [R, config.hiddenSize], tokens.dFinal), grads);
  // Old log-probs / reference: a forward that keeps nothing (two layers' buffers alternating) through the LM head.
  const lm = new CausalLm(engine, config, params);
  lm.trunk.lora = adapters;
  if (bf16) lm.trunk.setComputeDtype('bf16');
  const targets = engine.tensorFrom(
    'rows.targets',
    [R],
    tokens.inputIds.flatMap((row) => [...row.slice(1), 0]),
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

/** One training forward and backward of a full trunk: its dispatches, and how many of them merged key windows. */
async function trunkDispatches(engine: Engine, config: DecoderConfig, tokens: Tokens, checkpointing: boolean) {
  const params = createParameterArena(engine, config, 'rows.count');
  uploadArenaTensors(engine, params, initialParameters(config, 3, 0.3));
  const trunk = new DecoderTrunk(engine, config, params);
  trunk.gradientCheckpointing = checkpointing;
  const batch = uploadTokenBatch(engine, tokens, config.vocabSize, 'rows.count');
  const spy = vi.spyOn(engine, 'dispatch');
  try {
    const before = engine.dispatchCount;
    const hidden = trunk.forward(batch, { saveForBackward: true });
    trunk.backward(
      engine.tensor('rows.count.dFinal', [tokens.dFinal.length]),
      new Arena(engine, 'rows.count.grads', params.layout),
    );
    await engine.read(hidden);
    return {
      dispatches: engine.dispatchCount - before,
      merges: spy.mock.calls.filter(([spec]) => spec.name === 'attention/merge').length,
    };
  } finally {
    spy.mockRestore();
  }
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

/** On-policy distillation's top-k KL (forwardKlTopkGpu) from m = 3 sequences of 100 positions' hidden states
 *  (300 rows of 256 bytes: 75 KiB), 40 response tokens each, the last 6 of sequence 1 masked; returns its outputs
 *  (KL, student and teacher masses) and the gradient coefficients, and how many hidden windows it read. */
async function topkKl(engine: Engine) {
  const [m, S, Rr, C, K, V, temperature] = [3, 100, 40, CONFIG.hiddenSize, 5, CONFIG.vocabSize, 0.8];
  const klRandom = seededRandom(13);
  const hidden = Array.from({ length: m * S * C }, () => klRandom() - 0.5);
  const weight = Array.from({ length: V * C }, () => klRandom() - 0.5);
  // Each position's log-sum-exp of logits / T in float64, as the LM head's forward would give it.
  const lse = Array.from({ length: m * S }, (_, p) => {
    const z = Array.from({ length: V }, (_, v) => {
      let dot = 0;
      for (let c = 0; c < C; c++) dot += hidden[p * C + c] * weight[v * C + c];
      return dot / temperature;
    });
    const max = Math.max(...z);
    return max + Math.log(z.reduce((a, x) => a + Math.exp(x - max), 0));
  });
  const ids = Array.from({ length: m * Rr * K }, () => Math.floor(klRandom() * V));
  const teacher = Array.from({ length: m * Rr * K }, () => -1 - 3 * klRandom());
  const mask = Array.from({ length: m * Rr }, (_, i) => (i >= Rr && i < Rr + 6 ? 0 : 1));
  const out = engine.tensor('rows.kl.out', [3 * m * Rr]);
  const coefs = engine.tensor('rows.kl.coefs', [m * Rr * K]);
  const gpuHidden = engine.tensorFrom('rows.kl.hidden', [m * S, C], hidden);
  forwardKlTopkGpu(
    engine,
    {
      hidden: gpuHidden,
      weight: engine.tensorFrom('rows.kl.weight', [V, C], weight),
      lse: engine.tensorFrom('rows.kl.lse', [m * S], lse),
      teacherIds: engine.tensorFrom('rows.kl.ids', [m * Rr * K], ids, 'u32'),
      teacherLogProbs: engine.tensorFrom('rows.kl.teacher', [m * Rr * K], teacher),
      responseMask: engine.tensorFrom('rows.kl.mask', [m * Rr], mask),
      out,
      coefs,
    },
    { m, S, R: Rr, C, K, temperature, logProbMinClamp: -4 },
  );
  return {
    out: await engine.read(out),
    coefs: await engine.read(coefs),
    hiddenWindows: engine.bindingWindows(gpuHidden, C).length,
  };
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

/** One trunk run per engine (`run`) with the dispatches it took. */
type CountedRun = Awaited<ReturnType<typeof run>> & { dispatches: number };

/**
 * The windowed trunk ran its row-wise dispatches more than once and gave the unsplit trunk's hidden states, log-probs
 * and entropies bit for bit, its gradients within rounding (every layer's, or every adapter's with LoRA).
 */
function expectUnsplitTrunk(actual: CountedRun, expected: CountedRun, lora: boolean): void {
  expect(actual.dispatches).toBeGreaterThan(expected.dispatches);
  expect(actual.hidden).toEqual(expected.hidden);
  expect(actual.logprobs).toEqual(expected.logprobs);
  expect(actual.entropy).toEqual(expected.entropy);
  expectSameGradients(actual.grads, expected.grads);
  expect(actual.grads.size).toBe(lora ? 2 * 4 * 2 : 2 * 8 + 2);
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
      expectUnsplitTrunk(actual, expected, lora);
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

  it("on-policy distillation's top-k KL reads the hidden states in windows of rows: bit-identical", async () => {
    const expected = await count(await gpuEngine(), topkKl);
    const actual = await count(await splitEngine(), topkKl);
    // Windows of 128 rows (32 KiB) end inside sequences 1 and 2: one logits dispatch per window, then the KL.
    expect([expected.hiddenWindows, actual.hiddenWindows]).toEqual([1, 3]);
    expect([expected.dispatches, actual.dispatches]).toEqual([2, 4]);
    expect(expected.out.subarray(0, 120).some((kl) => kl > 0)).toBe(true);
    expect(actual.out).toEqual(expected.out);
    expect(actual.coefs).toEqual(expected.coefs);
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

    it('the windows: none where q/k/v binds, else multiples of 64 rows', () => {
      expect(attentionWindowRows(NARROW, B, T, 32 * 1024, 256)).toBe(null);
      expect(attentionWindowRows(NARROW, B, T, BINDING, 256)).toBe(64);
      // 8 floats of keys a token: 1,024 tokens' keys are above 12 KiB, so they are read in windows (below).
      expect(attentionWindowRows(NARROW, 1, 1024, 12 * 1024, 256)).toBe(64);
    });

    it('keys that bind whole: no key windows, the dispatches of before they existed', async () => {
      // Counted on the commit before key windows (7e329b5) with the same forward and backward, per device class.
      const before = (await engine()).caps.deviceClass === 'cpu' ? [280, 368] : [272, 360];
      for (const [i, checkpointing] of [false, true].entries())
        expect(
          await trunkDispatches(await engine(), NARROW, { inputIds, attentionMask, dFinal }, checkpointing),
        ).toEqual({
          dispatches: before[i],
          merges: 0,
        });
    });

    for (const { checkpointing, lora, bf16 } of cases) {
      it(`${lora ? 'LoRA' : 'full'}${bf16 ? ', bf16 compute' : ''}${checkpointing ? ', gradient checkpointing' : ''}: the unsplit trunk's hidden states, log-probs, entropies and gradients`, async () => {
        const whole = await gpuEngine();
        const expected = await count(whole, (e) => run(e, checkpointing, lora, bf16, NARROW));
        const actual = await count(await engine(), (e) => run(e, checkpointing, lora, bf16, NARROW));
        expectUnsplitTrunk(actual, expected, lora);
      });
    }

    it("a critic's values and gradients", async () => {
      const whole = await gpuEngine();
      const expected = await critic(whole, NARROW_CRITIC);
      const actual = await critic(await engine(), NARROW_CRITIC);
      expect(actual.values).toEqual(expected.values);
      expectSameGradients(actual.grads, expected.grads);
    });

    describe('attention over key windows (a sequence whose keys are above one binding)', () => {
      // Under 6.5 KiB a window of 64 rows of q/k/v (24 floats: 6 KiB) binds, but not one sequence's 448 keys (8 floats
      // each: 14 KiB): the forward and dq read keys in windows of 192, so of each sequence's 7 query windows the 4th to
      // 6th merge 2 key windows' partial results by their log-sum-exp and the 7th 3 (5 merges), and their dq sums 2 or
      // 3 passes. Sequence 1 is left-padded by 200 tokens: its first key window holds no real key (the merge's "no key
      // seen" path). A merged softmax is a few float32 roundings from the unsplit one (measured: outputs within
      // 1.2e-6·max, gradients within 1.2e-6·max|g|).
      const KEYS = parseHfConfig({
        architectures: ['Qwen3ForCausalLM'],
        tie_word_embeddings: true,
        ...SHAPE,
        vocab_size: 24,
        hidden_size: 16,
        intermediate_size: 8,
        num_attention_heads: 2,
        num_key_value_heads: 2,
        head_dim: 4,
      });
      const LONG = 448;
      const keyRandom = seededRandom(17);
      const ids = Array.from({ length: B }, () => Array.from({ length: LONG }, () => Math.floor(keyRandom() * 24)));
      const tokens: Tokens = {
        inputIds: ids,
        attentionMask: ids.map((row, b) => row.map((_, t) => (t >= 200 * b ? 1 : 0))),
        dFinal: Array.from({ length: B * LONG * KEYS.hiddenSize }, () => keyRandom() - 0.5),
      };
      const BINDING = 6.5 * 1024;
      let keyed: Engine | null = null;
      afterAll(() => keyed?.destroy());
      const engine = async () => (keyed ??= await Engine.create({ ...readKnobs(), maxBindingBytes: BINDING }));

      it("the windows: key windows only where a sequence's keys are above a binding, a multiple of the query windows", () => {
        expect(attentionWindowRows(KEYS, B, LONG, BINDING, 256)).toBe(64);
        expect(keyWindowRows(KEYS, LONG, 64, BINDING, 256)).toBe(192);
        expect(keyWindowRows(KEYS, 200, 64, BINDING, 256)).toBe(null);
        // Qwen3 (NKV·HS = 1,024) at 128 MiB: the keys of 32,767 tokens bind whole, of more in windows of 32,704.
        const qwen3 = { ...KEYS, numKvHeads: 8, headDim: 128 };
        expect(keyWindowRows(qwen3, 32767, 64, 128 * 2 ** 20, 256)).toBe(null);
        expect(keyWindowRows(qwen3, 40000, 64, 128 * 2 ** 20, 256)).toBe(32704);
      });

      it('5 merges a sequence and layer in each forward (the checkpointed backward recomputes one)', async () => {
        for (const [checkpointing, forwards] of [
          [false, 1],
          [true, 2],
        ] as const)
          expect((await trunkDispatches(await engine(), KEYS, tokens, checkpointing)).merges).toBe(
            5 * B * 2 * forwards,
          );
      });

      for (const { checkpointing, lora } of [
        { checkpointing: false, lora: false },
        { checkpointing: true, lora: true },
      ])
        it(`${lora ? 'LoRA' : 'full'}${checkpointing ? ', gradient checkpointing' : ''}: the unsplit trunk's outputs and gradients to float rounding`, async () => {
          const expected = await run(await gpuEngine(), checkpointing, lora, false, KEYS, tokens);
          const actual = await run(await engine(), checkpointing, lora, false, KEYS, tokens);
          // Merged partial softmaxes: each output a few float32 roundings from the unsplit one.
          for (const what of ['hidden', 'logprobs', 'entropy'] as const) {
            const scale = Math.max(...expected[what].map(Math.abs));
            expectClose(actual[what], expected[what], 2e-6 * scale, 1e-5, what);
          }
          expectSameGradients(actual.grads, expected.grads);
        });
    });
  });
});
