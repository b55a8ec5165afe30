import { describe, it } from 'vitest';
import { valueHeadForwardRef, valueHeadBackwardRef } from '../../kernels/layers/value-head.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('value-head reference backward', () => {
  it('matches finite differences', () => {
    const N = 5;
    const C = 7;
    const hidden = Float64Array.from(randomArray(N * C, 21));
    const weight = Float64Array.from(randomArray(C, 22));
    const bias = Float64Array.from([0.3]);
    const dValues = Float64Array.from(randomArray(N, 23));
    const loss = () => valueHeadForwardRef({ hidden, weight, bias, N, C }).reduce((s, v, n) => s + v * dValues[n], 0);
    const { dHidden, dWeight, dBias } = valueHeadBackwardRef({ hidden, weight, dValues, N, C });
    expectClose(dHidden, numericGradient(hidden, loss), 1e-8, 1e-6, 'dHidden');
    expectClose(dWeight, numericGradient(weight, loss), 1e-8, 1e-6, 'dWeight');
    expectClose(dBias, numericGradient(bias, loss), 1e-8, 1e-6, 'dBias');
  });
});
