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
import { Engine, readKnobs, roundToHalf, type HalfDType } from '../../engine/index.ts';
import { matmul, type MatmulArgs, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';

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
