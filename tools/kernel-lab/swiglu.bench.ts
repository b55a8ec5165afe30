// Bench cases of swiglu for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { swigluForward, swigluBackward } from '../../kernels/layers/swiglu.ts';
import { swigluForwardRef, swigluBackwardRef } from '../../kernels/layers/swiglu.ref.ts';
import { F32_BYTES, MODEL, ROWS, checkOutput, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** SwiGLU of the fused gate/up rows. */
export function swigluCases(): KernelBenchCase[] {
  const { intermediateSize: I } = MODEL;
  const rows = ROWS;
  const gateUp = randomValues(rows * 2 * I, 14);
  const dOut = randomValues(rows * I, 15);
  const shape = `rows=${rows},I=${I}`;
  const swigluForwardExpected = () => swigluForwardRef({ gateUp, rows, I });
  const swigluBackwardExpected = () => swigluBackwardRef({ gateUp, dOut, rows, I });
  return [
    {
      op: 'swiglu',
      kernel: 'swiglu forward',
      shape,
      bytes: F32_BYTES * 3 * rows * I,
      reference: swigluForwardExpected,
      setup: (engine) => {
        const gateUpTensor = upload(engine, 'gateUp', gateUp);
        const out = engine.tensor('bench-out', [rows * I]);
        return {
          run: () => swigluForward(engine, { gateUp: gateUpTensor, out, rows, I }),
          check: () => checkOutput(engine, 'out', out, swigluForwardExpected(), 1e-5, 1e-4),
        };
      },
    },
    {
      op: 'swiglu',
      kernel: 'swiglu backward',
      shape,
      bytes: F32_BYTES * 5 * rows * I,
      reference: swigluBackwardExpected,
      setup: (engine) => {
        const t = { gateUp: upload(engine, 'gateUp', gateUp), dOut: upload(engine, 'dOut', dOut) };
        const dGateUp = engine.tensor('bench-dGateUp', [rows * 2 * I]);
        return {
          run: () => swigluBackward(engine, { ...t, dGateUp, rows, I }),
          check: () => checkOutput(engine, 'dGateUp', dGateUp, swigluBackwardExpected(), 1e-5, 1e-4),
        };
      },
    },
  ];
}
