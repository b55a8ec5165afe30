// The reference backward of matmul against central finite differences of f(A, B, bias) = Σ G∘out, in float64.
import { describe, it, expect } from 'vitest';
import { matmulForwardRef, matmulBackwardRef, type MatmulRefArgs } from '../../kernels/matmul/matmul.ref.ts';
import type { MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { seededRandom } from '../support/arrays.ts';
import { numericGradientError } from '../support/numeric-gradient.ts';

function random64(n: number, seed: number): Float64Array {
  const random = seededRandom(seed);
  return Float64Array.from({ length: n }, () => random() * 2 - 1);
}

function objective(args: MatmulRefArgs, dout: Float64Array): number {
  const out = matmulForwardRef(args);
  let sum = 0;
  for (let i = 0; i < out.length; i++) sum += dout[i] * out[i];
  return sum;
}

/** Largest relative error of `analytic` against central differences of the objective in `param`. */
function finiteDifferenceError(
  args: MatmulRefArgs,
  dout: Float64Array,
  param: Float64Array,
  analytic: Float64Array,
): number {
  return numericGradientError(param, () => objective(args, dout), analytic, { h: 1e-5 });
}

describe('matmul reference backward', () => {
  const [M, N, K] = [5, 3, 4];
  const shapes: Record<MatmulLayout, { a: number; b: number }> = {
    nn: { a: M * K, b: K * N },
    nt: { a: M * K, b: N * K },
    tn: { a: K * M, b: K * N },
  };
  for (const layout of ['nn', 'nt', 'tn'] as const) {
    it(`matches finite differences for ${layout} with bias, alpha and accumulate`, () => {
      const a = random64(shapes[layout].a, 1);
      const b = random64(shapes[layout].b, 2);
      const bias = random64(N, 3);
      const out = random64(M * N, 4);
      const dout = random64(M * N, 5);
      const args: MatmulRefArgs = { a, b, M, N, K, layout, bias, out, accumulate: true, alpha: 0.7 };
      const grads = matmulBackwardRef({ ...args, dout });
      expect(finiteDifferenceError(args, dout, a, grads.da)).toBeLessThan(1e-6);
      expect(finiteDifferenceError(args, dout, b, grads.db)).toBeLessThan(1e-6);
      expect(finiteDifferenceError(args, dout, bias, grads.dbias!)).toBeLessThan(1e-6);
    });
  }

  it('agrees across layouts when the operands are transposed copies', () => {
    const a = random64(M * K, 6);
    const b = random64(K * N, 7);
    const transpose = (x: Float64Array, rows: number, cols: number) =>
      Float64Array.from({ length: x.length }, (_, i) => x[(i % rows) * cols + Math.floor(i / rows)]);
    const nn = matmulForwardRef({ a, b, M, N, K, layout: 'nn' });
    const nt = matmulForwardRef({ a, b: transpose(b, K, N), M, N, K, layout: 'nt' });
    const tn = matmulForwardRef({ a: transpose(a, M, K), b, M, N, K, layout: 'tn' });
    for (let i = 0; i < nn.length; i++) {
      expect(nt[i]).toBeCloseTo(nn[i], 12);
      expect(tn[i]).toBeCloseTo(nn[i], 12);
    }
  });
});
