// matmul over windows of a weight's rows (kernels/matmul/matmul.ts weightWindows): an engine that pretends to bind
// at most 4 KiB (the engine option behind WEBGPU_MAX_BINDING_BYTES) cannot bind these weights whole (a float32 W
// [256, 128] is 128 KiB; its NF4 codes 16 KiB), so the launcher takes them in windows of rows, each dispatch reading
// A from a column offset with a row stride, or writing out at a column offset. Against the unsplit engine (the same
// device class, the same variant): nt (y = x·Wᵀ, a window of W's rows is a window of y's columns) and tn (dW = dyᵀ·x,
// a window of dW's rows) give the same bits, each output being the same sum; nn (dx = dy·W, a window of W's rows is
// a window of the reduction) sums in pieces, within 1e-6·max + 1e-5 relative of the unsplit result. Both against
// the float64 reference (kernels/matmul/matmul.ref.ts) over the values B stands for. W [130, 36] takes the scalar
// loads (nn's and tn's A rows of 130, windows of 16 rows of 36 floats) and a last short window.
import { describe, it, expect, afterAll } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose, expectSameBits, randomArray } from '../support/arrays.ts';
import { quantizedB } from '../support/quantized-b.ts';
import {
  Arena,
  Engine,
  readKnobs,
  roundToHalf,
  seededRandom,
  type HalfDType,
  type Tensor,
} from '../../engine/index.ts';
import { matmul, type MatmulArgs, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, resolveTargetModules, type LoraSettings } from '../../models/lora.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';

const BINDING = 4096;
/** W [rows, cols] and the tokens multiplied: nt y [tokens, rows] = x·Wᵀ, nn dx [tokens, cols] = dy·W, tn dW
 *  [rows, cols] = dyᵀ·x. Quantized codes are 4-8x smaller: their odd shape has more rows. */
const WEIGHTS: Record<'float' | 'quantized', [number, number, number][]> = {
  float: [
    [256, 128, 4],
    [130, 36, 5],
  ],
  quantized: [
    [256, 128, 4],
    [520, 36, 1],
  ],
};
const LAYOUTS: MatmulLayout[] = ['nt', 'nn', 'tn'];
type Storage = 'f32' | HalfDType | 'nf4' | 'nf4-nested' | 'int8';

let split: Engine | null = null;
afterAll(() => split?.destroy());
const splitEngine = async () => (split ??= await Engine.create({ ...readKnobs(), maxBindingBytes: BINDING }));

/** One product on `engine`: out and how many dispatches it took. */
async function run(
  engine: Engine,
  c: { M: number; N: number; K: number; layout: MatmulLayout; storage: Storage; seed: number; options: boolean },
) {
  const { M, N, K, layout, storage, seed, options } = c;
  const aData = randomArray(M * K, seed);
  const weights = randomArray(K * N, seed + 1, 0.05);
  const biasData = randomArray(N, seed + 2);
  const before = randomArray(M * N, seed + 3);
  // W [out, in]: B [N, K] in nt, B [K, N] in nn; tn's B is an activation [K, N] (tn's W is out).
  const [rows, cols] = layout === 'nt' ? [N, K] : [K, N];
  let operand: Pick<MatmulArgs, 'b' | 'bQuant'>;
  let values: ArrayLike<number> = weights;
  if (storage === 'f32' || storage === 'bf16' || storage === 'f16') {
    operand = { b: engine.tensorFrom('w', [rows, cols], weights, storage) };
    if (storage !== 'f32') values = roundToHalf(storage, weights);
  } else {
    const q = quantizedB(engine, storage, weights, rows, cols);
    operand = { b: q.b, bQuant: q.bQuant };
    values = q.values;
  }
  const out = engine.tensorFrom('out', [M, N], before);
  const settings = options ? { accumulate: true, alpha: -0.5 } : {};
  const bias = options ? engine.tensorFrom('bias', [N], biasData) : undefined;
  const dispatches = engine.dispatchCount;
  matmul(engine, { a: engine.tensorFrom('a', [M * K], aData), ...operand, out, M, N, K, layout, bias, ...settings });
  const got = await engine.read(out);
  const expected = matmulForwardRef({
    a: aData,
    b: values,
    M,
    N,
    K,
    layout,
    bias: bias && biasData,
    out: before,
    ...settings,
  });
  return { got, expected, dispatches: engine.dispatchCount - dispatches };
}

const CASES: { layout: MatmulLayout; storage: Storage }[] = [
  ...LAYOUTS.map((layout) => ({ layout, storage: 'f32' as const })),
  ...(['bf16', 'f16', 'nf4', 'nf4-nested', 'int8'] as const).flatMap((storage) =>
    (['nt', 'nn'] as const).map((layout) => ({ layout, storage })),
  ),
];

describe('matmul over windows of a weight above one binding', () => {
  for (const { layout, storage } of CASES) {
    it(`${layout}, ${storage} B: the windows under a ${BINDING}-byte binding match the unsplit product and the float64 reference`, async () => {
      const whole = await gpuEngine();
      const windowed = await splitEngine();
      let seed = 900;
      const quantized = storage === 'int8' || storage.startsWith('nf4');
      for (const [rows, cols, tokens] of WEIGHTS[quantized ? 'quantized' : 'float']) {
        const [M, N, K] =
          layout === 'nt' ? [tokens, rows, cols] : layout === 'nn' ? [tokens, cols, rows] : [rows, cols, tokens];
        for (const options of [false, true]) {
          const c = { M, N, K, layout, storage, seed, options };
          seed += 4;
          const what = `${layout} ${storage} M=${M} N=${N} K=${K}${options ? ' bias, accumulate, alpha' : ''}`;
          const expected = await run(whole, c);
          const actual = await run(windowed, c);
          // One dispatch unsplit; the windows ran.
          expect(expected.dispatches, what).toBe(1);
          expect(actual.dispatches, what).toBeGreaterThan(1);
          if (layout === 'nn') {
            const scale = Math.max(...expected.got.map(Math.abs));
            expectClose(actual.got, expected.got, 1e-6 * scale, 1e-5, what);
          } else expectSameBits(actual.got, expected.got, what);
          // Quantized B: the bound of matmul.test.ts's quantized cases is tighter; this one only has to catch a
          // window reading the wrong scales or rows (errors of the size of the values).
          expectClose(actual.got, expected.expected, 1e-4, 1e-4, `${what} against float64`);
        }
      }
    });
  }

  it('refuses a prologue or epilogue on an nn product whose B is taken in windows (the reduction is split)', async () => {
    const engine = await splitEngine();
    const [M, N, K] = [4, 128, 256];
    const b = engine.tensor('w', [K, N]);
    const out = engine.tensor('out', [M, N]);
    const norm = { kind: 'rmsnorm', weight: engine.tensor('norm', [K]), eps: 1e-6 } as const;
    const a = engine.tensor('a', [M, K]);
    expect(() => matmul(engine, { a, b, out, M, N, K, layout: 'nn', prologue: norm })).toThrow(
      /matmul: b \(tensor w, 131072 bytes\) is above one binding \(4096 bytes\) .* a rmsnorm prologue cannot run over them/,
    );
  });
});

// A two-layer Qwen3 on an engine that binds at most 8 KiB: its qkv_proj [128, 64] and gate_up_proj [128, 64] (32 KiB
// in float32, 16 KiB in bf16), o_proj and down_proj [64, 64] (16 KiB in float32) are above it, so every product by
// them runs over windows of their rows — the forward, the backward's dx = dy·W, a full fine-tune's weight gradients
// (written a window of rows at a time; under bf16 mixed precision the products read the compute copy's windows),
// the prefill and the decode steps. The LoRA adapters (rank 4) and the
// activations of 16 tokens bind whole (the MLP in one row window), and every matmul has M <= 32 rows, where each
// variant's choice does not change with the rows (the register kernel on the CPU class, gpu-narrow on the GPU
// class); the unsplit engine multiplies by the weights as stored (`transposed-weights`, `decode-weights`:
// as-stored; the split engine makes no copies, its weights not binding whole). So the log-probs and each decode
// step's logits must equal the unsplit engine's bit for bit; the gradients, every dx a sum over windows, within
// 1e-6·max + 1e-5 relative.
const MODEL_BINDING = 8192;
const CONFIG = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 61,
  hidden_size: 64,
  intermediate_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: true,
});
const B = 2;
const T = 8;
/** Decoding: a 4-token prompt, then 5 greedy steps. */
const PROMPT = 4;
const STEPS = 5;
const LORA: LoraSettings = {
  rank: 4,
  alpha: 8,
  targetModules: resolveTargetModules(['all-linear'], null, 'test'),
  useRslora: false,
};
const random = seededRandom(11);
const inputIds = Array.from({ length: B }, () => Array.from({ length: T }, () => Math.floor(random() * 61)));
const attentionMask = inputIds.map((row, b) => row.map((_, t) => (t >= 3 * b ? 1 : 0)));
const dLogprobs = Array.from({ length: B * T }, () => random() - 0.5);

let modelSplit: Engine | null = null;
afterAll(() => modelSplit?.destroy());

/** `setting`: a float32 full fine-tune, the same under bf16 mixed precision (the compute copy, made window by window,
 *  is what the products read), or LoRA on a bf16 base. */
type Setting = 'full' | 'full, bf16 compute' | 'LoRA on a bf16 base';

async function runModel(engine: Engine, setting: Setting) {
  const lora = setting === 'LoRA on a bf16 base';
  const params = createParameterArena(engine, CONFIG, 'windows', lora ? 'bf16' : 'f32');
  uploadArenaTensors(engine, params, initialParameters(CONFIG, 3, 0.3));
  for (const name of ['self_attn.qkv_proj.weight', 'mlp.gate_up_proj.weight'])
    expect(params.get(`model.layers.0.${name}`).byteLength, name).toBeGreaterThan(MODEL_BINDING);
  const adapterRandom = seededRandom(5);
  // Every adapter entry random (B non-zero, as after training), so every adapter matrix gets a gradient.
  const values = new Map(
    [...initialLoraValues(CONFIG, LORA, 5)].map(([k, v]) => [k, v.map(() => 0.6 * (adapterRandom() - 0.5))]),
  );
  const adapters = lora ? new LoraAdapters(engine, CONFIG, LORA, values, 'windows') : null;
  const lm = new CausalLm(engine, CONFIG, params);
  lm.trunk.lora = adapters;
  if (setting === 'full, bf16 compute') lm.trunk.setComputeDtype('bf16');
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, CONFIG.vocabSize, 'windows');
  const targets = engine.tensorFrom(
    'windows.targets',
    [B * T],
    inputIds.flatMap((row) => [...row.slice(1), 0]),
    'u32',
  );
  // Old log-probs / reference (a forward that keeps nothing), then the update's forward and backward.
  const read = async (t: Tensor) => (await engine.read(t)) as Float32Array;
  const logprobs = await read(lm.tokenLogprobs(batch, targets, { saveForBackward: false }).logprobs);
  const trained = await read(lm.tokenLogprobs(batch, targets, { saveForBackward: true }).logprobs);
  const grads = new Arena(engine, 'windows.grads', (adapters?.params ?? params).layout);
  lm.backward(engine.tensorFrom('windows.dLogprobs', [B * T], dLogprobs), null, grads);
  const gradients = new Map<string, Float32Array>();
  for (const name of grads.names()) gradients.set(name, await read(grads.get(name)));

  const decoder = new IncrementalDecoder(engine, CONFIG, params, {
    maxRows: B,
    capacity: PROMPT + STEPS,
    maxTokens: PROMPT,
    lora: adapters,
  });
  decoder.reset(B);
  const prompt = inputIds.map((row) => row.slice(0, PROMPT));
  let logits = decoder.extend({
    ids: engine.tensorFrom('windows.prompt', [B * PROMPT], prompt.flat(), 'u32'),
    positions: engine.tensorFrom(
      'windows.positions',
      [B * PROMPT],
      prompt.flatMap((r) => r.map((_, t) => t)),
      'i32',
    ),
    T: PROMPT,
    mask: null,
  });
  const steps: Float32Array[] = [];
  for (let step = 0; ; step++) {
    const values = await read(logits);
    steps.push(values);
    if (step === STEPS) break;
    const V = CONFIG.vocabSize;
    const next = Array.from({ length: B }, (_, b) => {
      const row = values.subarray(b * V, (b + 1) * V);
      return row.indexOf(Math.max(...row));
    });
    logits = decoder.extend({
      ids: engine.tensorFrom('windows.next', [B], next, 'u32'),
      positions: engine.tensorFrom('windows.step', [B], [PROMPT + step, PROMPT + step], 'i32'),
      T: 1,
      mask: null,
    });
  }
  decoder.destroy();
  return { logprobs, trained, gradients, steps };
}

describe('a model whose layer weights are above one binding', () => {
  for (const setting of ['full', 'full, bf16 compute', 'LoRA on a bf16 base'] as const) {
    it(`${setting}: log-probs and decode steps bit-identical to the unsplit engine, gradients within rounding`, async () => {
      const whole = await gpuEngine();
      modelSplit ??= await Engine.create({ ...readKnobs(), maxBindingBytes: MODEL_BINDING });
      const variants = whole.knobs.kernelVariants;
      variants['transposed-weights'] = 'as-stored';
      variants['decode-weights'] = 'as-stored';
      try {
        const expected = await runModel(whole, setting);
        const actual = await runModel(modelSplit, setting);
        expectSameBits(actual.logprobs, expected.logprobs, 'log-probs (no backward kept)');
        expectSameBits(actual.trained, expected.trained, 'log-probs (training forward)');
        actual.steps.forEach((logits, step) => expectSameBits(logits, expected.steps[step], `decode step ${step}`));
        for (const [name, g] of expected.gradients) {
          expect(
            g.some((x) => x !== 0),
            name,
          ).toBe(true);
          const scale = Math.max(...g.map(Math.abs));
          expectClose(actual.gradients.get(name)!, g, 1e-6 * scale, 1e-5, name);
        }
        // LoRA: A and Bᵀ of 4 projections in 2 layers.
        if (setting === 'LoRA on a bf16 base') expect(expected.gradients.size).toBe(16);
      } finally {
        delete variants['transposed-weights'];
        delete variants['decode-weights'];
      }
    });
  }
});
