// Freivalds' check (tools/kernel-lab/compare.ts), which the matmul benchmarks run before timing at any size: a
// correct product passes in every layout; one wrong element, a transposed operand or a NaN fails.
import { describe, it, expect } from 'vitest';
import { seededRandom } from '../../engine/index.ts';
import { matmulProbeError } from '../../tools/kernel-lab/compare.ts';

function product(M: number, N: number, K: number, transposeA: boolean, transposeB: boolean) {
  const random = seededRandom(7);
  const a = Float32Array.from({ length: M * K }, () => 2 * random() - 1);
  const b = Float32Array.from({ length: K * N }, () => 2 * random() - 1);
  const out = new Float32Array(M * N);
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let sum = 0;
      for (let k = 0; k < K; k++)
        sum += (transposeA ? a[k * M + m] : a[m * K + k]) * (transposeB ? b[n * K + k] : b[k * N + n]);
      out[m * N + n] = sum;
    }
  return { a, b, out, shape: { M, N, K, transposeA, transposeB } };
}

describe('matmulProbeError', () => {
  it.each([
    [false, false],
    [false, true],
    [true, false],
  ])('passes a float32 product (transposeA %s, transposeB %s) and fails one wrong element', (ta, tb) => {
    const { a, b, out, shape } = product(37, 29, 53, ta, tb);
    expect(matmulProbeError(a, b, out, shape, seededRandom(1))).toBeLessThan(1e-5);
    const wrong = out.slice();
    wrong[5 * 29 + 11] += 0.5;
    expect(matmulProbeError(a, b, wrong, shape, seededRandom(1))).toBeGreaterThan(1e-2);
    wrong[0] = Number.NaN;
    expect(matmulProbeError(a, b, wrong, shape, seededRandom(1))).toBe(Infinity);
  });

  it('fails the product of the wrong layout', () => {
    const { a, b, out } = product(16, 16, 16, false, false);
    expect(
      matmulProbeError(a, b, out, { M: 16, N: 16, K: 16, transposeA: false, transposeB: true }, seededRandom(1)),
    ).toBeGreaterThan(1e-2);
  });
});
