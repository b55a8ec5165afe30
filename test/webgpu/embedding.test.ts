import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import {
  embeddingForward,
  embeddingBackward,
  embeddingBackwardVariants,
  buildTokenIndex,
} from '../../kernels/layers/embedding.ts';
import { embeddingForwardRef, embeddingBackwardRef } from '../../kernels/layers/embedding.ref.ts';
import { randomArray, expectClose, seededRandom } from '../support/arrays.ts';

describe('embedding kernel', () => {
  const V = 11;
  const cases = [
    { N: 1, C: 4, accumulate: false },
    { N: 7, C: 12, accumulate: true },
    { N: 33, C: 130, accumulate: false },
    { N: 33, C: 260, accumulate: true },
    // More entries than one workgroup of lane-per-entry holds.
    { N: 150, C: 8, accumulate: true },
  ];
  for (const variant of embeddingBackwardVariants)
    for (const { N, C, accumulate } of cases) {
      it(
        `forward and backward (${variant.name}) match the reference for N=${N}, C=${C}, ` + `accumulate=${accumulate}`,
        async () => {
          const engine = await gpuEngine();
          engine.knobs.kernelVariants['embedding-backward'] = variant.name;
          const random = seededRandom(N + C);
          // Ids from the lower half of the vocabulary, so tokens repeat and some rows get no gradient.
          const ids = Uint32Array.from({ length: N }, () => Math.floor(random() * (V / 2)));
          const tableData = randomArray(V * C, C);
          const dOutData = randomArray(N * C, N);
          const dTableBefore = randomArray(V * C, 3);
          const out = engine.tensor('out', [N, C]);
          embeddingForward(engine, {
            ids: engine.tensorFrom('ids', [N], ids, 'u32'),
            table: engine.tensorFrom('table', [V, C], tableData),
            out,
            N,
            V,
            C,
          });
          const index = buildTokenIndex(ids, V);
          const dTable = engine.tensorFrom('dTable', [V, C], dTableBefore);
          embeddingBackward(engine, {
            tokenIds: engine.tensorFrom('tokenIds', [N], index.ids, 'u32'),
            tokenPositions: engine.tensorFrom('tokenPositions', [N], index.positions, 'u32'),
            dOut: engine.tensorFrom('dOut', [N, C], dOutData),
            dTable,
            N,
            V,
            C,
            accumulate,
          });
          expectClose(await engine.read(out), embeddingForwardRef({ ids, table: tableData, N, V, C }), 1e-7, 0, 'out');
          const grad = embeddingBackwardRef({ ids, dOut: dOutData, N, V, C });
          expectClose(
            await engine.read(dTable),
            accumulate ? grad.map((g, k) => g + dTableBefore[k]) : grad,
            1e-6,
            1e-5,
            'dTable',
          );
          delete engine.knobs.kernelVariants['embedding-backward'];
        },
      );
    }

  it('clamps ids past the vocabulary to its last row', async () => {
    const engine = await gpuEngine();
    const [N, V, C] = [3, 5, 4];
    const tableData = randomArray(V * C, 71);
    const out = engine.tensor('out', [N, C]);
    embeddingForward(engine, {
      ids: engine.tensorFrom('ids', [N], [2, V, 0xffffffff], 'u32'),
      table: engine.tensorFrom('table', [V, C], tableData),
      out,
      N,
      V,
      C,
    });
    expectClose(
      await engine.read(out),
      embeddingForwardRef({ ids: [2, V - 1, V - 1], table: tableData, N, V, C }),
      1e-7,
      0,
      'out',
    );
  });
});
