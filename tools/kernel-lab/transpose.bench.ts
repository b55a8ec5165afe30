// Bench cases of transpose for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { transpose } from '../../kernels/util/transpose.ts';
import { transposeRef } from '../../kernels/util/transpose.ref.ts';
import { F32_BYTES, MODEL, checkOutput, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** The copy Wᵀ of the largest layer weight, fused gate/up (2I, C), that a training forward on a CPU multiplies by. */
export function transposeCases(): KernelBenchCase[] {
  const rows = 2 * MODEL.intermediateSize;
  const cols = MODEL.hiddenSize;
  const x = randomValues(rows * cols, 29);
  const transposeExpected = () => transposeRef({ x, rows, cols });
  return [
    {
      op: 'transpose',
      kernel: 'transpose',
      shape: `rows=${rows},cols=${cols}`,
      bytes: F32_BYTES * 2 * rows * cols,
      reference: transposeExpected,
      setup: (engine) => {
        const xTensor = upload(engine, 'x', x);
        const out = engine.tensor('bench-out', [cols * rows]);
        return {
          run: () => transpose(engine, { x: xTensor, out, rows, cols }),
          check: () => checkOutput(engine, 'out', out, transposeExpected(), 1e-7, 0),
        };
      },
    },
  ];
}
