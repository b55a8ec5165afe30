import { describe, it } from 'vitest';
import { headRmsnormForwardRef, headRmsnormBackwardRef } from '../../kernels/layers/head-rmsnorm.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('head-rmsnorm reference backward', () => {
  it('matches finite differences for qkv and both weights', () => {
    const shape = { rows: 2, NH: 3, NKV: 2, HS: 4 };
    const eps = 1e-6;
    const width = (shape.NH + 2 * shape.NKV) * shape.HS;
    const qkv = Float64Array.from(randomArray(shape.rows * width, 51));
    const qWeight = Float64Array.from(randomArray(shape.HS, 52));
    const kWeight = Float64Array.from(randomArray(shape.HS, 53));
    const dOut = Float64Array.from(randomArray(shape.rows * width, 54));
    const forward = () => headRmsnormForwardRef({ ...shape, qkv, qWeight, kWeight, eps });
    const loss = () => forward().out.reduce((s, v, k) => s + v * dOut[k], 0);
    const grads = headRmsnormBackwardRef({ ...shape, qkv, qWeight, kWeight, rstd: forward().rstd, dOut });
    expectClose(grads.dQkv, numericGradient(qkv, loss), 1e-8, 1e-6, 'dQkv');
    expectClose(grads.dQWeight, numericGradient(qWeight, loss), 1e-8, 1e-6, 'dQWeight');
    expectClose(grads.dKWeight, numericGradient(kWeight, loss), 1e-8, 1e-6, 'dKWeight');
  });
});
