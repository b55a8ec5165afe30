import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { transpose } from '../../kernels/util/transpose.ts';
import { transposeRef } from '../../kernels/util/transpose.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

describe('transpose kernel', () => {
  // 4x4 blocks (both sides multiples of 4, square and not, more than one workgroup) and the element path.
  for (const [rows, cols] of [
    [4, 4],
    [8, 12],
    [256, 128],
    [128, 384],
    [1, 1],
    [7, 13],
    [12, 6],
    [3, 64],
  ]) {
    it(`matches the reference for rows=${rows}, cols=${cols}`, async () => {
      const engine = await gpuEngine();
      const data = randomArray(rows * cols, rows * 31 + cols);
      const out = engine.tensorFrom('out', [cols, rows], randomArray(rows * cols, 5));
      transpose(engine, { x: engine.tensorFrom('x', [rows, cols], data), out, rows, cols });
      expectClose(await engine.read(out), transposeRef({ x: data, rows, cols }), 1e-12, 0, `transpose ${rows}x${cols}`);
    });
  }
});
