import { describe, it } from 'vitest';
import { rmsnormForwardRef, rmsnormBackwardRef } from '../../kernels/layers/rmsnorm.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('rmsnorm reference backward', () => {
  it('matches finite differences for x and weight', () => {
    const [rows, cols, eps] = [3, 7, 1e-6];
    const x = Float64Array.from(randomArray(rows * cols, 41));
    const weight = Float64Array.from(randomArray(cols, 42));
    const dOut = Float64Array.from(randomArray(rows * cols, 43));
    const loss = () => rmsnormForwardRef({ x, weight, rows, cols, eps }).out.reduce((s, v, k) => s + v * dOut[k], 0);
    const { rstd } = rmsnormForwardRef({ x, weight, rows, cols, eps });
    const { dx, dWeight } = rmsnormBackwardRef({ x, weight, rstd, dOut, rows, cols });
    expectClose(dx, numericGradient(x, loss), 1e-8, 1e-6, 'dx');
    expectClose(dWeight, numericGradient(weight, loss), 1e-8, 1e-6, 'dWeight');
  });
});
