// Frozen models' weights in bf16/f16: the conversion kernel (bit-exact against the host conversion), the
// embedding's half table, and whole models — a bf16 model gives exactly the log-probs of the float32 model
// holding the same bf16-rounded weights, within bf16 rounding of the unrounded model, and the same again on
// an engine that binds at most 16 KiB (the half embedding split into windows) up to float rounding.
import { describe, it, expect, afterAll } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import {
  SPLIT_BYTES,
  SPLIT_MODEL_ROWS,
  randomSplitModelParameters,
  splitModelBatch,
  splitModelConfig,
} from '../support/split-model.ts';
import { expectClose, randomArray, seededRandom } from '../support/arrays.ts';
import { Engine, Tensor, readKnobs, roundToHalf, type Arena, type FloatDType } from '../../engine/index.ts';
import { toHalf } from '../../kernels/util/to-half.ts';
import { toHalfRef } from '../../kernels/util/to-half.ref.ts';
import { fromHalf } from '../../kernels/util/from-half.ts';
import { fromHalfRef } from '../../kernels/util/from-half.ref.ts';
import { embeddingForward } from '../../kernels/layers/embedding.ts';
import { embeddingForwardRef } from '../../kernels/layers/embedding.ref.ts';
import { createParameterArena, frozenParameterCopy, uploadArenaTensors } from '../../models/parameter-store.ts';
import { parameterEntries } from '../../models/parameter-layout.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { writeQwen3Model, QWEN3_TINY_LAYER } from '../../tools/qwen3-model.ts';
import { parameterBytes } from '../../ppo/jobs/memory-plan.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DTYPES = ['bf16', 'f16'] as const;

/** The packed 16-bit patterns of a half tensor, read through a u32 view of its words. */
async function halfBits(engine: Engine, tensor: Tensor): Promise<number[]> {
  const words = await engine.read(
    new Tensor(`${tensor.name}.words`, tensor.buffer, tensor.byteOffset, [Math.ceil(tensor.size / 2)], 'u32'),
  );
  return [...new Uint16Array(words.buffer, words.byteOffset, tensor.size)];
}

// Specials and ties of both formats: ±0, ±inf, NaN, f16's overflow and subnormal edges, bf16 ties.
const SPECIALS = [
  0,
  -0,
  Infinity,
  -Infinity,
  NaN,
  65504,
  65520,
  65519.99,
  2 ** -25,
  2 ** -24,
  1e-30,
  -3.4e38,
  1 + 2 ** -8,
  1 + 3 * 2 ** -8,
  1 + 2 ** -11,
];

describe('to-half kernel', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: bit-exact against the host conversion, odd lengths included`, async () => {
      const engine = await gpuEngine();
      for (const n of [1, 2, 15, 1001]) {
        const values = Float32Array.from({ length: n }, (_, i) =>
          i < SPECIALS.length ? SPECIALS[i] : Math.sin(i) * 10 ** ((i % 9) - 4),
        );
        const halves = engine.tensor('halves', [n], dtype);
        toHalf(engine, { values: engine.tensorFrom('values', [n], values), halves });
        expect(await halfBits(engine, halves), `${dtype} n=${n}`).toEqual([...toHalfRef(dtype, values).slice(0, n)]);
      }
    });
  }
});

describe('from-half kernel', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: to-half's output unpacked bit for bit as the host decodes it, odd lengths included`, async () => {
      const engine = await gpuEngine();
      for (const n of [1, 2, 15, 1001]) {
        const values = Float32Array.from({ length: n }, (_, i) =>
          i < SPECIALS.length ? SPECIALS[i] : Math.sin(i) * 10 ** ((i % 9) - 4),
        );
        const halves = engine.tensor('halves', [n], dtype);
        toHalf(engine, { values: engine.tensorFrom('values', [n], values), halves });
        // Garbage first: every element must be written.
        const out = engine.tensorFrom('out', [n], new Float32Array(n).fill(7));
        fromHalf(engine, { halves, values: out });
        const expected = fromHalfRef(dtype, toHalfRef(dtype, values), n);
        const bits = (a: Float32Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];
        expect(bits(await engine.read(out)), `${dtype} n=${n}`).toEqual(bits(expected));
      }
    });
  }
});

describe('embedding with a half-precision table', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: rows of the ${dtype}-rounded table, vec4 and scalar widths`, async () => {
      const engine = await gpuEngine();
      const V = 11;
      for (const [N, C] of [
        [7, 12],
        [5, 6],
        [33, 130],
      ]) {
        const random = seededRandom(N * C);
        const ids = Uint32Array.from({ length: N }, () => Math.floor(random() * V));
        const tableData = randomArray(V * C, C);
        const out = engine.tensor('out', [N, C]);
        embeddingForward(engine, {
          ids: engine.tensorFrom('ids', [N], ids, 'u32'),
          table: engine.tensorFrom('table', [V, C], tableData, dtype),
          out,
          N,
          V,
          C,
        });
        expect([...(await engine.read(out))], `${dtype} N=${N} C=${C}`).toEqual([
          ...embeddingForwardRef({ ids, table: roundToHalf(dtype, tableData), N, V, C }),
        ]);
      }
    });
  }
});

const config = splitModelConfig;
const randomParameters = randomSplitModelParameters;
const { inputIds, attentionMask } = splitModelBatch;
const R = SPLIT_MODEL_ROWS;
const targets = Uint32Array.from({ length: R }, (_, i) => (i * 71) % 1000);

async function logprobs(
  engine: Engine,
  params: Arena,
  label: string,
): Promise<{ logprobs: Float32Array; entropy: Float32Array }> {
  const lm = new CausalLm(engine, config, params);
  const batch = uploadTokenBatch(engine, { inputIds, attentionMask }, config.vocabSize, label);
  const out = lm.tokenLogprobs(batch, engine.tensorFrom(`${label}.targets`, [R], targets, 'u32'), {
    saveForBackward: false,
  });
  return {
    logprobs: Float32Array.from(await engine.read(out.logprobs)),
    entropy: Float32Array.from(await engine.read(out.entropy)),
  };
}

function uploaded(engine: Engine, values: Map<string, Float32Array>, label: string, dtype: FloatDType = 'f32'): Arena {
  const params = createParameterArena(engine, config, label, dtype);
  uploadArenaTensors(engine, params, values);
  return params;
}

/** The values a half arena holds: matrices rounded, norms as they are. */
function rounded(values: Map<string, Float32Array>, dtype: 'bf16' | 'f16'): Map<string, Float32Array> {
  const half = new Set(
    parameterEntries(config, dtype)
      .filter((e) => e.dtype === dtype)
      .map((e) => e.name),
  );
  return new Map([...values].map(([name, data]) => [name, half.has(name) ? roundToHalf(dtype, data) : data]));
}

describe('a frozen model in half precision', () => {
  let split: Engine | null = null;
  afterAll(() => split?.destroy());

  for (const dtype of DTYPES) {
    it(
      `${dtype}: the log-probs of float32 arithmetic over the ${dtype}-rounded weights, bit for bit; close to the ` +
        `float32 model`,
      async () => {
        const engine = await gpuEngine();
        const values = randomParameters();
        const half = uploaded(engine, values, `half-${dtype}`, dtype);
        expect(half.get('model.layers.0.mlp.gate_up_proj.weight').dtype).toBe(dtype);
        expect(half.get('model.layers.0.input_layernorm.weight').dtype).toBe('f32');
        const actual = await logprobs(engine, half, `half-${dtype}`);
        const exact = await logprobs(
          engine,
          uploaded(engine, rounded(values, dtype), `rounded-${dtype}`),
          `rounded-${dtype}`,
        );
        expect([...actual.logprobs]).toEqual([...exact.logprobs]);
        expect([...actual.entropy]).toEqual([...exact.entropy]);
        const full = await logprobs(engine, uploaded(engine, values, `f32-${dtype}`), `f32-${dtype}`);
        // bf16 keeps 8 mantissa bits: relative weight error ≤ 2^-9, a few hundredths of a nat over this model.
        expectClose(
          actual.logprobs,
          full.logprobs,
          dtype === 'bf16' ? 0.05 : 0.005,
          0.01,
          `${dtype} vs float32 log-probs`,
        );

        // The reference made on the device from a float32 actor holds the same bits as one uploaded in dtype.
        const copy = frozenParameterCopy(
          engine,
          config,
          uploaded(engine, values, `actor-${dtype}`),
          `copy-${dtype}`,
          dtype,
        );
        for (const name of half.names()) {
          const [a, b] = [copy.get(name), half.get(name)];
          if (a.dtype === 'f32') expect([...(await engine.read(a))], name).toEqual([...(await engine.read(b))]);
          else expect(await halfBits(engine, a), name).toEqual(await halfBits(engine, b));
        }
      },
    );
  }

  it('bf16 under a forced 16 KiB binding limit: the half embedding splits into windows, same log-probs', async () => {
    const whole = await gpuEngine();
    split = await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES });
    const values = randomParameters();
    const params = uploaded(split, values, 'split-bf16', 'bf16');
    const slot = params.layout.slots.find((s) => s.name === 'model.embed_tokens.weight')!;
    // 1000 × 32 bf16 = 64 KiB: its own buffer, bound as 4 windows.
    expect(params.layout.segments.filter((s) => s.buffer === slot.parts[0].buffer)).toHaveLength(4);
    const expected = await logprobs(whole, uploaded(whole, values, 'whole-bf16', 'bf16'), 'whole-bf16');
    const actual = await logprobs(split, params, 'split-bf16');
    // The split LM head also runs in vocabulary chunks (an online log-sum-exp): float rounding, as unsplit f32.
    expectClose(actual.logprobs, expected.logprobs, 1e-6, 1e-5, 'split bf16 log-probs');
    const copy = frozenParameterCopy(split, config, uploaded(split, values, 'split-actor'), 'split-copy', 'bf16');
    expect([...(await logprobs(split, copy, 'split-copy')).logprobs]).toEqual([...actual.logprobs]);
  });
});

describe('a Qwen3-shaped bf16 checkpoint (vocabulary 151,936) loaded as a bf16 frozen model', () => {
  it(
    "takes the plan's half bytes and gives the float32-loaded model's log-probs bit for bit (its weights are bf16 " +
      'values)',
    async () => {
      const engine = await gpuEngine();
      const root = await mkdtemp(join(tmpdir(), 'qwen3-half-'));
      try {
        await writeQwen3Model(root, { ...QWEN3_TINY_LAYER, layers: 1 }, 4);
        const f32 = await loadModel(engine, root, { label: 'qwen3-f32' });
        const bf16 = await loadModel(engine, root, {
          label: 'qwen3-bf16',
          weightDtype: (dtype) => (dtype === 'bfloat16' ? 'bf16' : 'f32'),
        });
        // Arena words hold the bytes the memory plan counts, up to each tensor's 256-byte alignment.
        const arenaBytes = (params: Arena) => params.totalElements * 4;
        expect(arenaBytes(bf16.params)).toBeGreaterThanOrEqual(parameterBytes(bf16.config, 'bf16'));
        expect(arenaBytes(bf16.params) - parameterBytes(bf16.config, 'bf16')).toBeLessThan(
          256 * bf16.params.layout.slots.length,
        );
        expect(arenaBytes(bf16.params) / arenaBytes(f32.params)).toBeCloseTo(0.5, 2);
        const inputIds = [
          [151644, 872, 198, 9707, 11, 1879, 0, 151645],
          [151643, 151643, 151644, 77091, 198, 16, 10, 151935],
        ];
        const attentionMask = [
          [1, 1, 1, 1, 1, 1, 1, 1],
          [0, 0, 1, 1, 1, 1, 1, 1],
        ];
        const targets = inputIds.flatMap((row) => [...row.slice(1), 151645]);
        const run = async (params: Arena, label: string) => {
          const lm = new CausalLm(engine, f32.config, params);
          const out = lm.tokenLogprobs(
            uploadTokenBatch(engine, { inputIds, attentionMask }, f32.config.vocabSize, label),
            engine.tensorFrom(`${label}.targets`, [16], targets, 'u32'),
            { saveForBackward: false },
          );
          return [...(await engine.read(out.logprobs))];
        };
        expect(await run(bf16.params, 'qwen3-bf16')).toEqual(await run(f32.params, 'qwen3-f32'));
      } finally {
        await rm(root, { recursive: true, force: true });
      }
    },
  );
});
