import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { gatherRows } from '../../kernels/util/gather-rows.ts';
import { gatherRowsRef } from '../../kernels/util/gather-rows.ref.ts';
import { randomArray } from '../support/arrays.ts';

describe('gather-rows kernel', () => {
  // Rows out of order and repeated (a shuffled mini-batch, a token-budget micro-batch sorted by length), a window
  // narrower than the source's rows, and more elements than one workgroup holds.
  const cases: [string, number, number, number[], number][] = [
    ['every row, full width', 5, 7, [0, 1, 2, 3, 4], 7],
    ['shuffled, repeated, a window of 3 of 7 columns', 5, 7, [4, 0, 4, 2], 3],
    ['one row', 9, 1, [8], 1],
    ['300 rows of 600 columns (704 workgroups)', 400, 600, Array.from({ length: 300 }, (_, i) => (i * 7) % 400), 600],
  ];
  for (const [what, N, stride, rows, width] of cases) {
    it(`matches the reference: ${what}`, async () => {
      const engine = await gpuEngine();
      const data = randomArray(N * stride, N + stride);
      const source = engine.tensorFrom('source', [N, stride], data);
      const out = engine.tensor('out', [rows.length, width]);
      gatherRows(engine, {
        source,
        sourceStride: stride,
        rows: engine.tensorFrom('rows', [rows.length], rows, 'u32'),
        m: rows.length,
        width,
        out,
      });
      expect(Array.from(await engine.read(out))).toEqual(
        Array.from(gatherRowsRef({ source: data, sourceStride: stride, rows, width })),
      );
    });
  }

  it('refuses a window wider than the source rows, naming the tensor', async () => {
    const engine = await gpuEngine();
    const source = engine.tensor('experience.old', [2, 4]);
    const rows = engine.tensorFrom('rows', [1], [0], 'u32');
    expect(() =>
      gatherRows(engine, { source, sourceStride: 4, rows, m: 1, width: 5, out: engine.tensor('out', [5]) }),
    ).toThrow("gatherRows: width 5 exceeds the source's 4 columns (tensor experience.old)");
  });
});
