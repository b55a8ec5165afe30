// Bench cases of rmsnorm for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { rmsnormForward, rmsnormBackward } from '../../kernels/layers/rmsnorm.ts';
import { rmsnormForwardRef, rmsnormBackwardRef } from '../../kernels/layers/rmsnorm.ref.ts';
import {
  F32_BYTES,
  MODEL,
  ROWS,
  checkOutput,
  checkOutputs,
  randomValues,
  upload,
  type KernelBenchCase,
} from './bench-inputs.ts';

/** The trunk's RMSNorm over hidden rows; the backward adds into dWeight as every call in the trunk does. */
export function rmsnormCases(): KernelBenchCase[] {
  const { hiddenSize: cols, rmsNormEps: eps } = MODEL;
  const rows = ROWS;
  const x = randomValues(rows * cols, 4);
  const weight = randomValues(cols, 5);
  const dOut = randomValues(rows * cols, 6);
  const rmsnormForwardExpected = () => rmsnormForwardRef({ x, weight, rows, cols, eps });
  const { rstd } = rmsnormForwardExpected();
  const shape = `rows=${rows},C=${cols}`;
  const rmsnormBackwardExpected = () => rmsnormBackwardRef({ x, weight, rstd, dOut, rows, cols });
  return [
    {
      op: 'rmsnorm',
      kernel: 'rmsnorm forward',
      shape,
      bytes: F32_BYTES * (2 * rows * cols + cols + rows),
      reference: rmsnormForwardExpected,
      setup: (engine) => {
        const t = { x: upload(engine, 'x', x), weight: upload(engine, 'weight', weight) };
        const out = engine.tensor('bench-out', [rows * cols]);
        const rstdTensor = engine.tensor('bench-rstd', [rows]);
        return {
          run: () => rmsnormForward(engine, { ...t, out, rstd: rstdTensor, rows, cols, eps }),
          check: () => checkOutput(engine, 'out', out, rmsnormForwardExpected().out, 1e-5, 1e-4),
        };
      },
    },
    {
      op: 'rmsnorm',
      kernel: 'rmsnorm backward',
      shape,
      bytes: F32_BYTES * (3 * rows * cols + rows + 3 * cols),
      reference: rmsnormBackwardExpected,
      setup: (engine) => {
        const t = {
          x: upload(engine, 'x', x),
          weight: upload(engine, 'weight', weight),
          rstd: upload(engine, 'rstd', Float32Array.from(rstd)),
          dOut: upload(engine, 'dOut', dOut),
        };
        const dx = engine.tensor('bench-dx', [rows * cols]);
        const dWeight = engine.tensor('bench-dWeight', [cols]);
        // One run from zeroed gradients: dWeight accumulates across the timed runs, dx is written.
        return {
          run: () =>
            rmsnormBackward(engine, { ...t, dx, dWeight, rows, cols, accumulateDx: false, accumulateDWeight: true }),
          check: () => {
            const expected = rmsnormBackwardExpected();
            return checkOutputs(engine, [
              ['dx', dx, expected.dx, 1e-5, 1e-4],
              ['dWeight', dWeight, expected.dWeight, 1e-4, 1e-4],
            ]);
          },
        };
      },
    },
  ];
}
