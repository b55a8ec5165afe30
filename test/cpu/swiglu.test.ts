import { describe, it } from 'vitest';
import { swigluForwardRef, swigluBackwardRef } from '../../kernels/layers/swiglu.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('swiglu reference backward', () => {
  it('matches finite differences', () => {
    const rows = 3;
    const I = 5;
    const gateUp = Float64Array.from(randomArray(rows * 2 * I, 31, 4));
    const dOut = Float64Array.from(randomArray(rows * I, 32));
    const loss = () => swigluForwardRef({ gateUp, rows, I }).reduce((s, v, k) => s + v * dOut[k], 0);
    expectClose(swigluBackwardRef({ gateUp, dOut, rows, I }), numericGradient(gateUp, loss), 1e-8, 1e-6, 'dGateUp');
  });
});
