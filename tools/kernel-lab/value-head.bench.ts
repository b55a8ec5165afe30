// Bench cases of value-head for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { valueHeadForward, valueHeadBackward } from '../../kernels/layers/value-head.ts';
import { valueHeadForwardRef, valueHeadBackwardRef } from '../../kernels/layers/value-head.ref.ts';
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

/** The critic's scalar head over hidden rows. */
export function valueHeadCases(): KernelBenchCase[] {
  const { hiddenSize: C } = MODEL;
  const N = ROWS;
  const hidden = randomValues(N * C, 21);
  const weight = randomValues(C, 22);
  const bias = randomValues(1, 23);
  const dValues = randomValues(N, 24);
  const shape = `N=${N},C=${C}`;
  const valueHeadForwardExpected = () => valueHeadForwardRef({ hidden, weight, bias, N, C });
  const valueHeadBackwardExpected = () => valueHeadBackwardRef({ hidden, weight, dValues, N, C });
  return [
    {
      op: 'value-head',
      kernel: 'value-head forward',
      shape,
      bytes: F32_BYTES * (N * C + C + 1 + N),
      reference: valueHeadForwardExpected,
      setup: (engine) => {
        const t = {
          hidden: upload(engine, 'hidden', hidden),
          weight: upload(engine, 'weight', weight),
          bias: upload(engine, 'bias', bias),
        };
        const values = engine.tensor('bench-values', [N]);
        return {
          run: () => valueHeadForward(engine, { ...t, values, N, C }),
          check: () => checkOutput(engine, 'values', values, valueHeadForwardExpected(), 1e-5, 1e-4),
        };
      },
    },
    {
      op: 'value-head',
      kernel: 'value-head backward',
      shape,
      bytes: F32_BYTES * (2 * N * C + N + 3 * C + 2),
      reference: valueHeadBackwardExpected,
      setup: (engine) => {
        const t = {
          hidden: upload(engine, 'hidden', hidden),
          weight: upload(engine, 'weight', weight),
          dValues: upload(engine, 'dValues', dValues),
        };
        const grads = {
          dHidden: engine.tensor('bench-dHidden', [N * C]),
          dWeight: engine.tensor('bench-dWeight', [C]),
          dBias: engine.tensor('bench-dBias', [1]),
        };
        // One run from zeroed gradients: dWeight and dBias are added to.
        return {
          run: () => valueHeadBackward(engine, { ...t, ...grads, N, C }),
          check: () => {
            const expected = valueHeadBackwardExpected();
            return checkOutputs(engine, [
              ['dHidden', grads.dHidden, expected.dHidden, 1e-5, 1e-4],
              ['dWeight', grads.dWeight, expected.dWeight, 1e-4, 1e-4],
              ['dBias', grads.dBias, expected.dBias, 1e-4, 1e-4],
            ]);
          },
        };
      },
    },
  ];
}
