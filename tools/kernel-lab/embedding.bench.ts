// Bench cases of embedding for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { embeddingForward, embeddingBackward, buildTokenIndex } from '../../kernels/layers/embedding.ts';
import { embeddingForwardRef, embeddingBackwardRef } from '../../kernels/layers/embedding.ref.ts';
import {
  F32_BYTES,
  MODEL,
  ROWS,
  checkOutput,
  randomValues,
  randomIds,
  upload,
  type KernelBenchCase,
} from './bench-inputs.ts';

/** Token embedding gather, and its scatter-add backward over the token index the trainer builds on the host. */
export function embeddingCases(): KernelBenchCase[] {
  const { vocabSize: V, hiddenSize: C } = MODEL;
  const N = ROWS;
  const ids = randomIds(N, 1, V);
  const table = randomValues(V * C, 2);
  const dOut = randomValues(N * C, 3);
  const shape = `N=${N},V=${V},C=${C}`;
  const embeddingForwardExpected = () => embeddingForwardRef({ ids, table, N, V, C });
  const embeddingBackwardExpected = () => embeddingBackwardRef({ ids, dOut, N, V, C });
  return [
    {
      op: 'embedding',
      kernel: 'embedding forward',
      shape,
      bytes: F32_BYTES * (N + V * C + N * C),
      reference: embeddingForwardExpected,
      setup: (engine) => {
        const idsTensor = engine.tensorFrom('bench-ids', [N], ids, 'u32');
        const tableTensor = upload(engine, 'table', table);
        const out = engine.tensor('bench-out', [N * C]);
        return {
          run: () => embeddingForward(engine, { ids: idsTensor, table: tableTensor, out, N, V, C }),
          check: () => checkOutput(engine, 'out', out, embeddingForwardExpected(), 1e-7, 0),
        };
      },
    },
    {
      op: 'embedding',
      kernel: 'embedding backward',
      shape,
      bytes: F32_BYTES * (V + 1 + N + N * C + V * C),
      reference: embeddingBackwardExpected,
      setup: (engine) => {
        const index = buildTokenIndex(ids, V);
        const tokenIds = engine.tensorFrom('bench-token-ids', [N], index.ids, 'u32');
        const tokenPositions = engine.tensorFrom('bench-token-positions', [N], index.positions, 'u32');
        const dOutTensor = upload(engine, 'dOut', dOut);
        const dTable = engine.tensor('bench-dTable', [V * C]);
        return {
          run: () =>
            embeddingBackward(engine, {
              tokenIds,
              tokenPositions,
              dOut: dOutTensor,
              dTable,
              N,
              V,
              C,
              accumulate: false,
            }),
          check: () => checkOutput(engine, 'dTable', dTable, embeddingBackwardExpected(), 1e-5, 1e-4),
        };
      },
    },
  ];
}
