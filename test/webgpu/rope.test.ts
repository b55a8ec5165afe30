import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { ropeForward, ropeBackward } from '../../kernels/layers/rope.ts';
import { ropeForwardRef, ropeBackwardRef, type RopeRefArgs } from '../../kernels/layers/rope.ref.ts';
import { randomArray, expectClose, seededRandom } from '../support/arrays.ts';

/** Positions of a left-padded batch of B rows of T tokens, like HF: cumsum(mask) - 1, pads set to 1. */
function leftPaddedPositions(B: number, T: number, seed: number): Int32Array {
  const random = seededRandom(seed);
  const positions = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    const pads = Math.floor(random() * T);
    for (let t = 0; t < T; t++) positions[b * T + t] = t < pads ? 1 : t - pads;
  }
  return positions;
}

async function checkRope(args: RopeRefArgs, size: number): Promise<void> {
  const engine = await gpuEngine();
  const qkvData = randomArray(size, size);
  const dQkvData = randomArray(size, size + 1);
  const positions = engine.tensorFrom('positions', [args.rows], args.positions, 'i32');
  const qkv = engine.tensorFrom('qkv', [size], qkvData);
  const dQkv = engine.tensorFrom('dQkv', [size], dQkvData);
  ropeForward(engine, { ...args, positions, qkv });
  ropeBackward(engine, { ...args, positions, dQkv });
  expectClose(await engine.read(qkv), ropeForwardRef({ ...args, qkv: qkvData }), 2e-6, 1e-5, 'qkv');
  expectClose(await engine.read(dQkv), ropeBackwardRef({ ...args, dQkv: dQkvData }), 2e-6, 1e-5, 'dQkv');
}

describe('rope kernel', () => {
  const cases = [
    { B: 1, T: 1, NH: 4, NKV: 2, HS: 8 },
    { B: 1, T: 7, NH: 6, NKV: 1, HS: 12 },
    { B: 3, T: 11, NH: 4, NKV: 2, HS: 32 },
    { B: 3, T: 11, NH: 6, NKV: 1, HS: 6 },
  ];
  for (const { B, T, NH, NKV, HS } of cases) {
    it(
      `forward and backward match the reference for rows=${B * T}, NH=${NH}, NKV=${NKV}, HS=${HS}, left ` + `padding`,
      async () => {
        const rows = B * T;
        const args = { positions: leftPaddedPositions(B, T, rows + HS), rows, NH, NKV, HS, theta: 10000 };
        await checkRope(args, rows * (NH + 2 * NKV) * HS);
      },
    );
  }

  it('keeps f32 accuracy at positions up to 400k (angles range-reduced before sin and cos)', async () => {
    const rows = 6;
    const positions = Int32Array.from([1000, 4097, 32767, 100000, 262143, 400000]);
    await checkRope({ positions, rows, NH: 2, NKV: 1, HS: 16, theta: 1_000_000 }, rows * 4 * 16);
  });

  it('rotates a row range of a strided buffer (KV cache) and leaves the rest alone', async () => {
    // k heads only (NH = 0) of a cache with rows of NKV k heads then NKV v heads, starting at cache row 2.
    const [NKV, HS, rows] = [2, 16, 5];
    const rowStride = 2 * NKV * HS;
    const args = {
      positions: Int32Array.from([2, 3, 4, 5, 6]),
      rows,
      NH: 0,
      NKV,
      HS,
      theta: 10000,
      rowStride,
      colOffset: 2 * rowStride,
    };
    await checkRope(args, 9 * rowStride);
    // A column offset that breaks vec4 alignment takes the scalar path.
    await checkRope({ ...args, colOffset: 2 * rowStride + 2 }, 9 * rowStride);
  });
});
