import { describe, it } from 'vitest';
import { ropeForwardRef, ropeBackwardRef } from '../../kernels/layers/rope.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('rope reference backward', () => {
  it('matches finite differences, v heads included', () => {
    const shape = { rows: 3, NH: 2, NKV: 1, HS: 6, theta: 10000, positions: [0, 5, 1234] };
    const size = shape.rows * (shape.NH + 2 * shape.NKV) * shape.HS;
    const qkv = Float64Array.from(randomArray(size, 81));
    const dOut = Float64Array.from(randomArray(size, 82));
    const loss = () => ropeForwardRef({ ...shape, qkv }).reduce((s, v, k) => s + v * dOut[k], 0);
    expectClose(ropeBackwardRef({ ...shape, dQkv: dOut }), numericGradient(qkv, loss), 1e-8, 1e-6, 'dQkv');
  });
});
