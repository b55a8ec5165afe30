import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { gpuMatmulTiles, matmul, matmulVariants, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';
import { rmsnormForwardRef } from '../../kernels/layers/rmsnorm.ref.ts';
import { swigluForwardRef } from '../../kernels/layers/swiglu.ref.ts';
import { chooseVariant, readKnobs, roundToHalf, type Engine, type FloatDType } from '../../engine/index.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { quantizedB } from '../support/quantized-b.ts';

// [M, N, K]: single elements, odd sizes below and across the tiles (8x64, 64x64x32, gpu's 128x128x8 and 64x64x8),
// a whole tile, N and K not multiples of 4 (scalar loads), M not a multiple of 4 with the rest aligned (tn loads A
// rows of length M).
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [7, 13, 5],
  [33, 65, 17],
  [64, 64, 64],
  [130, 3, 257],
  [6, 8, 36],
  [5, 131, 9],
];
const LAYOUTS: MatmulLayout[] = ['nn', 'nt', 'tn'];
const OPTIONS = [
  { label: 'plain' },
  { label: 'bias', bias: true },
  { label: 'accumulate, alpha', accumulate: true, alpha: -0.5 },
  { label: 'bias, accumulate, alpha', bias: true, accumulate: true, alpha: 2 },
];

/** One case against matmulForwardRef, its four operands random from `seed` (a, b, bias, out): `b` stored as
 *  `dtype` (the reference reads it rounded to that dtype). Returns the next unused seed. */
async function expectMatchesReference(
  engine: Engine,
  c: {
    M: number;
    N: number;
    K: number;
    layout: MatmulLayout;
    option: (typeof OPTIONS)[number];
    seed: number;
    dtype?: FloatDType;
    what: string;
  },
): Promise<number> {
  const { M, N, K, layout, option, dtype = 'f32', what } = c;
  let seed = c.seed;
  const aData = randomArray(M * K, seed++);
  const bData = randomArray(K * N, seed++);
  const biasData = randomArray(N, seed++);
  const outData = randomArray(M * N, seed++);
  const out = engine.tensorFrom('out', [M, N], outData);
  const bias = option.bias ? engine.tensorFrom('bias', [N], biasData) : undefined;
  const b = engine.tensorFrom('b', [K * N], bData, dtype);
  matmul(engine, {
    a: engine.tensorFrom('a', [M * K], aData),
    b,
    out,
    M,
    N,
    K,
    layout,
    bias,
    accumulate: option.accumulate,
    alpha: option.alpha,
  });
  const expected = matmulForwardRef({
    a: aData,
    b: dtype === 'f32' ? bData : roundToHalf(dtype, bData),
    M,
    N,
    K,
    layout,
    bias: bias && biasData,
    out: outData,
    accumulate: option.accumulate,
    alpha: option.alpha,
  });
  expectClose(await engine.read(out), expected, 1e-5, 1e-5, what);
  return seed;
}

// 'cpu' and 'cpu-subgroups' only combine register (or register-shuffle) and tiled, and 'gpu' gpu-wide and
// gpu-narrow, each tested on its own (gpu's choice between them: below); register-shuffle on devices with
// subgroups of 8 lanes (M = 64 and 130 take its shuffled nn and tn products).
const COMBINATIONS = ['cpu', 'cpu-subgroups', 'gpu'];
for (const variant of matmulVariants.filter((v) => !COMBINATIONS.includes(v.name))) {
  describe(`matmul/${variant.name}`, () => {
    for (const layout of LAYOUTS) {
      it(`matches the reference for ${layout} on odd shapes with bias, accumulate and alpha`, async () => {
        const engine = await gpuEngine();
        if (!variant.supported(engine.caps)) return;
        engine.knobs.kernelVariants.matmul = variant.name;
        try {
          let seed = 1;
          for (const [M, N, K] of SHAPES) {
            for (const option of OPTIONS) {
              seed = await expectMatchesReference(engine, {
                M,
                N,
                K,
                layout,
                option,
                seed,
                what: `${variant.name} ${layout} M=${M} N=${N} K=${K} ${option.label}`,
              });
            }
          }
        } finally {
          delete engine.knobs.kernelVariants.matmul;
        }
      });
    }
  });
}

// Decode steps fold the rmsnorm before a projection, and the swiglu before down_proj, into the matmul's A loads
// (nn: against a decoder's transposed weights on CPU devices).
describe('matmul prologues (register kernel: nt with K % 4 == 0, or nn)', () => {
  const PROLOGUE_SHAPES: [number, number, number][] = [
    [1, 1, 4],
    [7, 13, 36],
    [9, 65, 8],
    [33, 70, 128],
    [8, 384, 128],
    [10, 20, 52],
  ];
  for (const [kind, layout] of [
    ['rmsnorm', 'nt'],
    ['swiglu', 'nt'],
    ['rmsnorm', 'nn'],
    ['swiglu', 'nn'],
  ] as const) {
    it(
      `${kind} ${layout}: matches the ${kind} reference followed by the matmul reference, with bias and ` +
        `accumulate`,
      async () => {
        const engine = await gpuEngine();
        let seed = 100;
        // nn with swiglu, which decode steps use only under LoRA, skips the odd N (one pipeline fewer to compile cold).
        for (const [M, N, K] of PROLOGUE_SHAPES.filter(
          ([, N]) => !(kind === 'swiglu' && layout === 'nn' && N % 4 !== 0),
        )) {
          for (const option of OPTIONS) {
            const what = `${kind} ${layout} M=${M} N=${N} K=${K} ${option.label}`;
            const xData = randomArray(kind === 'swiglu' ? 2 * M * K : M * K, seed++);
            const weightData = randomArray(K, seed++);
            const bData = randomArray(K * N, seed++);
            const biasData = randomArray(N, seed++);
            const outData = randomArray(M * N, seed++);
            const out = engine.tensorFrom('out', [M, N], outData);
            const bias = option.bias ? engine.tensorFrom('bias', [N], biasData) : undefined;
            const eps = 1e-6;
            matmul(engine, {
              a: engine.tensorFrom('x', [xData.length], xData),
              b: engine.tensorFrom('w', [K * N], bData),
              out,
              M,
              N,
              K,
              layout,
              bias,
              accumulate: option.accumulate,
              alpha: option.alpha,
              prologue:
                kind === 'rmsnorm' ? { kind, weight: engine.tensorFrom('norm', [K], weightData), eps } : { kind },
            });
            const a =
              kind === 'rmsnorm'
                ? rmsnormForwardRef({ x: xData, weight: weightData, rows: M, cols: K, eps }).out
                : swigluForwardRef({ gateUp: xData, rows: M, I: K });
            const expected = matmulForwardRef({
              a,
              b: bData,
              M,
              N,
              K,
              layout,
              bias: bias && biasData,
              out: outData,
              accumulate: option.accumulate,
              alpha: option.alpha,
            });
            expectClose(await engine.read(out), expected, 1e-5, 1e-5, what);
          }
        }
      },
    );
  }

  it('refuses a layout or K the register kernel cannot fold', async () => {
    const engine = await gpuEngine();
    const a = engine.tensor('x', [8, 6]);
    expect(() =>
      matmul(engine, {
        a,
        b: engine.tensor('w', [6, 8]),
        out: engine.tensor('y', [8, 8]),
        M: 8,
        N: 8,
        K: 6,
        layout: 'nt',
        prologue: { kind: 'swiglu' },
      }),
    ).toThrow(/swiglu prologue needs layout nt with K % 4 == 0, or nn; got nt with K=6/);
  });
});

// Decode steps on CPU devices: gate_up's product goes straight through swiglu (B = [K, 2N]: gate columns, then up).
describe('matmul swiglu epilogue (register kernel, nn)', () => {
  it(
    'matches the matmul reference followed by the swiglu reference, with and without the rmsnorm ' + 'prologue',
    async () => {
      const engine = await gpuEngine();
      let seed = 700;
      // The odd N (scalar B loads) without the prologue only: the loads and the prologue are independent code, and
      // each combination is a pipeline to compile cold.
      for (const [M, N, K] of [
        [1, 1, 4],
        [7, 13, 36],
        [9, 64, 128],
        [3, 20, 12],
      ] as const) {
        for (const norm of N % 4 === 0 ? [false, true] : [false]) {
          const what = `M=${M} N=${N} K=${K}${norm ? ' rmsnorm' : ''}`;
          const xData = randomArray(M * K, seed++);
          const weightData = randomArray(K, seed++);
          const bData = randomArray(K * 2 * N, seed++);
          const out = engine.tensor('act', [M, N]);
          matmul(engine, {
            a: engine.tensorFrom('x', [M * K], xData),
            b: engine.tensorFrom('w', [K, 2 * N], bData),
            out,
            M,
            N,
            K,
            layout: 'nn',
            epilogue: 'swiglu',
            prologue: norm
              ? { kind: 'rmsnorm', weight: engine.tensorFrom('norm', [K], weightData), eps: 1e-6 }
              : undefined,
          });
          const a = norm ? rmsnormForwardRef({ x: xData, weight: weightData, rows: M, cols: K, eps: 1e-6 }).out : xData;
          const gateUp = matmulForwardRef({ a, b: bData, M, N: 2 * N, K, layout: 'nn' });
          expectClose(await engine.read(out), swigluForwardRef({ gateUp, rows: M, I: N }), 1e-5, 1e-5, what);
        }
      }
    },
  );

  it('refuses a layout other than nn, a bias, and a B narrower than 2N', async () => {
    const engine = await gpuEngine();
    const a = engine.tensor('x', [8, 4]);
    const out = engine.tensor('act', [8, 8]);
    expect(() =>
      matmul(engine, { a, b: engine.tensor('w', [16, 4]), out, M: 8, N: 8, K: 4, layout: 'nt', epilogue: 'swiglu' }),
    ).toThrow(/swiglu epilogue needs layout nn and no bias, accumulate or alpha; got nt/);
    expect(() =>
      matmul(engine, {
        a,
        b: engine.tensor('w', [4, 16]),
        out,
        M: 8,
        N: 8,
        K: 4,
        layout: 'nn',
        epilogue: 'swiglu',
        bias: engine.tensor('bias', [8]),
      }),
    ).toThrow(/got nn with a bias/);
    expect(() =>
      matmul(engine, { a, b: engine.tensor('w', [4, 8]), out, M: 8, N: 8, K: 4, layout: 'nn', epilogue: 'swiglu' }),
    ).toThrow(/matmul: b \(tensor w, shape \[4, 8\]\) has 32 elements, expected at least 64 = nn B \[K=4, 2N=16\]/);
  });
});

// A frozen LoRA base quantized as B, dequantized in-kernel: NF4 (engine/nf4.ts), NF4 with double-quantized block
// scales, int8 rows (engine/int8.ts). NF4's and int8's dequantized values are the same float32 products
// (code·absmax; (code·SCB)·1/127) the host's dequantizers make, so the kernel multiplies exactly the values the float64
// reference gets; what is left is float32 arithmetic: |out − ref| ≤ γ(K+3)·(|α|·Σ_k |a_k·b_k| + |bias| + |out
// before|), γ(n) = n·u/(1 − n·u), u = 2⁻²⁴ (K products and sums, α, the bias and the accumulated out). A
// double-quantized scale map[q]·absmax₂ + offset may be one fma in the kernel and two roundings on the host: up
// to u·(|map[q]·absmax₂| + |scale|) ≤ u·(|scale| + 2·max scale) apart, so its Σ_k |a_k·b_k| takes |b_k| as
// |code|·(|scale| + 2·max scale). nt is the forward, nn the backward's dX = dY·W. K = 4·j takes the quad loads;
// odd N·K ends in a padded nibble and a partial block; [2, 264, 128] spans three 256-blocks of double-quantized
// scales, the last partial. gpu-wide is gpu-narrow's source with another tile constant: not repeated.
describe('matmul with a quantized B', () => {
  const QUANTIZED_SHAPES: [number, number, number][] = [
    [1, 1, 1],
    [7, 13, 5],
    [3, 9, 12],
    [8, 65, 64],
    [33, 70, 96],
    [2, 131, 136],
    [2, 264, 128],
  ];
  const u = 2 ** -24;

  for (const variant of matmulVariants.filter(
    (v) => !COMBINATIONS.includes(v.name) && v.name !== 'register-shuffle' && v.name !== 'gpu-wide',
  )) {
    it(`${variant.name}: nf4, double-quantized nf4 and int8, nt and nn, within float32 error of float64`, async () => {
      const engine = await gpuEngine();
      engine.knobs.kernelVariants.matmul = variant.name;
      try {
        let seed = 500;
        for (const format of ['nf4', 'nf4-nested', 'int8'] as const) {
          for (const layout of ['nt', 'nn'] as const) {
            for (const [M, N, K] of QUANTIZED_SHAPES) {
              const option = OPTIONS[seed % OPTIONS.length];
              const aData = randomArray(M * K, seed++);
              const weights = randomArray(K * N, seed++, 0.05);
              const biasData = randomArray(N, seed++);
              const before = randomArray(M * N, seed++);
              // W [out, in]: B [N, K] in nt, B [K, N] in nn (dY·W).
              const [rows, cols] = layout === 'nt' ? [N, K] : [K, N];
              const { b, bQuant, values, magnitudes } = quantizedB(engine, format, weights, rows, cols);
              const out = engine.tensorFrom('out', [M, N], before);
              matmul(engine, {
                a: engine.tensorFrom('a', [M * K], aData),
                b,
                bQuant,
                out,
                M,
                N,
                K,
                layout,
                bias: option.bias ? engine.tensorFrom('bias', [N], biasData) : undefined,
                accumulate: option.accumulate,
                alpha: option.alpha,
              });
              const ref = { a: aData, M, N, K, layout, accumulate: option.accumulate, alpha: option.alpha };
              const expected = matmulForwardRef({
                ...ref,
                b: values,
                bias: option.bias ? biasData : undefined,
                out: before,
              });
              // Σ|a·b| from the same reference over |a| and the magnitudes, then the bias and the old out on top.
              const magnitude = matmulForwardRef({ ...ref, a: aData.map(Math.abs), b: magnitudes, accumulate: false });
              const got = await engine.read(out);
              const gamma = ((K + 3) * u) / (1 - (K + 3) * u);
              for (let i = 0; i < M * N; i++) {
                const bound =
                  gamma *
                  (Math.abs(option.alpha ?? 1) * magnitude[i] +
                    (option.bias ? Math.abs(biasData[i % N]) : 0) +
                    (option.accumulate ? Math.abs(before[i]) : 0));
                expect(
                  Math.abs(got[i] - expected[i]),
                  `${variant.name} ${format} ${layout} M=${M} N=${N} K=${K} ${option.label} [${i}]`,
                ).toBeLessThanOrEqual(bound);
              }
            }
          }
        }
      } finally {
        delete engine.knobs.kernelVariants.matmul;
      }
    });
  }

  it('refuses a quantized b in layout tn, with a prologue, without u32 codes, or too short', async () => {
    const engine = await gpuEngine();
    const [a, out] = [engine.tensor('x', [4, 4]), engine.tensor('y', [4, 4])];
    const codes = engine.tensor('w', [2], 'u32');
    const bQuant = { format: 'nf4', absmax: engine.tensor('w.absmax', [1]) } as const;
    expect(() => matmul(engine, { a, b: codes, bQuant, out, M: 4, N: 4, K: 4, layout: 'tn' })).toThrow(
      /an NF4 b \(tensor w, a frozen LoRA base\) is read in layouts nt and nn without prologue or epilogue; got tn/,
    );
    const norm = { kind: 'rmsnorm', weight: engine.tensor('norm', [4]), eps: 1e-6 } as const;
    expect(() => matmul(engine, { a, b: codes, bQuant, out, M: 4, N: 4, K: 4, layout: 'nt', prologue: norm })).toThrow(
      /got nt with a rmsnorm prologue/,
    );
    expect(() =>
      matmul(engine, { a, b: engine.tensor('w', [16]), bQuant, out, M: 4, N: 4, K: 4, layout: 'nt' }),
    ).toThrow(/an NF4 b needs u32 codes and f32 \(or double-quantized u32\) block scales; b \(tensor w\) is f32/);
    expect(() =>
      matmul(engine, { a, b: engine.tensor('w', [1], 'u32'), bQuant, out, M: 4, N: 4, K: 4, layout: 'nt' }),
    ).toThrow(/b \(tensor w, shape \[1\]\) has 1 elements, expected at least 2 = NF4 codes of nt B/);
    const nested = { format: 'nf4', absmax: engine.tensor('w.absmax', [256], 'u32') } as const;
    expect(() => matmul(engine, { a, b: codes, bQuant: nested, out, M: 4, N: 4, K: 4, layout: 'nt' })).toThrow(
      /bQuant.absmax \(tensor w.absmax, shape \[256\]\) has 256 elements, expected at least 259 = double-quantized/,
    );
    const int8 = { format: 'int8', scb: engine.tensor('w.SCB', [3]) } as const;
    expect(() =>
      matmul(engine, { a, b: engine.tensor('w', [4], 'u32'), bQuant: int8, out, M: 4, N: 4, K: 4, layout: 'nn' }),
    ).toThrow(/bQuant.scb \(tensor w.SCB, shape \[3\]\) has 3 elements, expected at least 4 = row scales/);
    expect(() =>
      matmul(engine, {
        a,
        b: engine.tensor('w', [4], 'u32'),
        bQuant: { format: 'int8', scb: engine.tensor('w.SCB', [4]) },
        out,
        M: 4,
        N: 4,
        K: 4,
        layout: 'tn',
      }),
    ).toThrow(/an int8 b \(tensor w, a frozen LoRA base\) is read in layouts nt and nn/);
  });
});

// Frozen weights as B in bf16 or f16 (nt, the forward; nn, a LoRA base's dX = dY·W), unpacked in-kernel: the
// same sums as float32 arithmetic over the half-rounded weights. K = 4·j takes the quad loads, other K the scalar
// loads; an odd K ends a B row mid-word.
describe('matmul with a half-precision B', () => {
  const HALF_SHAPES: [number, number, number][] = [
    [1, 1, 1],
    [7, 13, 5],
    [3, 9, 12],
    [8, 65, 64],
    [33, 70, 96],
    [2, 130, 136],
  ];
  // f16 twice: read natively (shader-f16, where the device has it) and unpacked from words (any device). Native
  // reads are a GPU path (CPU devices never pick them), tested under the GPU's matmul variant, gpu, only: the
  // loads are one file shared by every variant, and each variant is two more pipelines to compile cold.
  const STORAGES = [
    ['bf16', null],
    ['f16', 'native'],
    ['f16', 'unpacked'],
  ] as const;
  for (const [dtype, f16Variant] of STORAGES) {
    const label = f16Variant ? `${dtype} ${f16Variant}` : dtype;
    // register-shuffle reads half B through the register pipelines: nothing of its own to test.
    for (const variant of matmulVariants.filter(
      (v) =>
        !COMBINATIONS.includes(v.name) &&
        v.name !== 'register-shuffle' &&
        (f16Variant !== 'native' || v.name.startsWith('gpu-')),
    )) {
      it(`${label} ${variant.name}: nt and nn match the reference over the ${dtype}-rounded weights`, async () => {
        const engine = await gpuEngine();
        if (f16Variant === 'native' && !engine.caps.shaderF16) return;
        engine.knobs.kernelVariants.matmul = variant.name;
        if (f16Variant) engine.knobs.kernelVariants['matmul-f16'] = f16Variant;
        try {
          let seed = 300;
          for (const layout of ['nt', 'nn'] as const) {
            for (const [M, N, K] of HALF_SHAPES) {
              const option = OPTIONS[seed % OPTIONS.length];
              seed = await expectMatchesReference(engine, {
                M,
                N,
                K,
                layout,
                option,
                seed,
                dtype,
                what: `${dtype} ${variant.name} ${layout} M=${M} N=${N} K=${K} ${option.label}`,
              });
            }
          }
        } finally {
          delete engine.knobs.kernelVariants.matmul;
          delete engine.knobs.kernelVariants['matmul-f16'];
        }
      });
    }
  }
  it('refuses a half-precision operand other than b', async () => {
    const engine = await gpuEngine();
    expect(() =>
      matmul(engine, {
        a: engine.tensor('x', [4, 4], 'bf16'),
        b: engine.tensor('w', [4, 4]),
        out: engine.tensor('y', [4, 4]),
        M: 4,
        N: 4,
        K: 4,
        layout: 'nt',
      }),
    ).toThrow(/a \(tensor x\) is bf16; only b may be half precision/);
  });

  it('refuses a half b in layout tn (frozen weights have no weight gradient)', async () => {
    const engine = await gpuEngine();
    expect(() =>
      matmul(engine, {
        a: engine.tensor('dy', [4, 4]),
        b: engine.tensor('w', [4, 4], 'bf16'),
        out: engine.tensor('dx', [4, 4]),
        M: 4,
        N: 4,
        K: 4,
        layout: 'tn',
      }),
    ).toThrow(/a bf16 b \(tensor w, frozen weights\) is read in layouts nt and nn only \(x·Wᵀ, dY·W\); got tn/);
  });

  it('refuses a prologue or epilogue with a half b (decode steps multiply by float32 weights only)', async () => {
    const engine = await gpuEngine();
    const [a, out] = [engine.tensor('x', [4, 4]), engine.tensor('y', [4, 4])];
    const norm = { kind: 'rmsnorm', weight: engine.tensor('norm', [4]), eps: 1e-6 } as const;
    expect(() =>
      matmul(engine, { a, b: engine.tensor('w', [4, 4], 'bf16'), out, M: 4, N: 4, K: 4, layout: 'nt', prologue: norm }),
    ).toThrow(/rmsnorm prologue needs a float32 b \(decode steps of the trained actor\); b \(tensor w\) is bf16/);
    expect(() =>
      matmul(engine, {
        a,
        b: engine.tensor('w', [4, 8], 'f16'),
        out,
        M: 4,
        N: 4,
        K: 4,
        layout: 'nn',
        epilogue: 'swiglu',
      }),
    ).toThrow(/swiglu epilogue needs a float32 b .*is f16/);
  });
});

describe('matmul launcher', () => {
  it('records one dispatch per call and picks a cpu variant on CPUs, gpu on GPUs', async () => {
    const engine = await gpuEngine();
    const chosen = chooseVariant('matmul', matmulVariants, engine.caps, readKnobs({})).name;
    const cpu = engine.caps.subgroups && engine.caps.subgroupMinSize >= 8 ? 'cpu-subgroups' : 'cpu';
    expect(chosen).toBe(engine.caps.deviceClass === 'cpu' ? cpu : 'gpu');
    const a = engine.tensor('a', [8, 4]);
    const b = engine.tensor('b', [4, 8]);
    const before = engine.dispatchCount;
    matmul(engine, {
      a,
      b,
      out: engine.tensor('out', [8, 8]),
      M: 8,
      N: 8,
      K: 4,
      layout: 'nn',
      bias: engine.tensor('bias', [8]),
      accumulate: true,
    });
    expect(engine.dispatchCount - before).toBe(1);
  });

  it(
    'gpu takes wide tiles for outputs of at least 128 of them, at least 128 rows and columns, narrow tiles ' +
      'otherwise',
    () => {
      expect(gpuMatmulTiles(1024, 1024)).toBe('narrow'); // 64 wide tiles, 256 narrow
      expect(gpuMatmulTiles(1, 151936)).toBe('narrow'); // a decode step's LM head: 1187 wide tiles of one row
      expect(gpuMatmulTiles(127, 151936)).toBe('narrow');
      expect(gpuMatmulTiles(128, 16384)).toBe('wide');
      expect(gpuMatmulTiles(1024, 2048)).toBe('wide');
      expect(gpuMatmulTiles(1025, 1921)).toBe('wide'); // 9 x 15 partial tiles
      expect(gpuMatmulTiles(4096, 4096)).toBe('wide');
    },
  );

  it('names the tensor whose size does not fit', async () => {
    const engine = await gpuEngine();
    const a = engine.tensor('x', [8, 4]);
    const b = engine.tensor('w', [6, 4]);
    expect(() => matmul(engine, { a, b, out: engine.tensor('y', [8, 8]), M: 8, N: 8, K: 4, layout: 'nt' })).toThrow(
      /matmul: b \(tensor w, shape \[6, 4\]\) has 24 elements, expected at least 32 = nt B \[N=8, K=4\]/,
    );
    expect(() => matmul(engine, { a, b: a, out: a, M: 8, N: 4, K: 4, layout: 'nn' })).toThrow(/overlaps a/);
  });
});
