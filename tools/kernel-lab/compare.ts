// How far a kernel's output is from its CPU reference: the labs' validation and the tests' expectClose
// (test/support/arrays.ts) use the same measure.

/** Largest |a-b| / (atol + rtol·|b|); ≤ 1 means every element is within tolerance, NaN counts as Infinity. */
export function maxViolation(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  atol: number,
  rtol: number,
): number {
  if (actual.length !== expected.length) throw new Error(`length ${actual.length} vs expected ${expected.length}`);
  let worst = 0;
  for (let i = 0; i < actual.length; i++) {
    const v = Math.abs(actual[i] - expected[i]) / (atol + rtol * Math.abs(expected[i]));
    if (!(v <= worst)) worst = Number.isNaN(v) ? Infinity : v;
  }
  return worst;
}

/**
 * Freivalds' check of a matmul out (M, N) = op(A) · op(B) without the O(MNK) product: for `probes` random vectors r,
 * out·r against op(A)·(op(B)·r) in float64, O(MK + KN + MN) each. Returns the largest |difference| over the
 * largest |op(A)·(op(B)·r)| (a wrong kernel is off by O(1) of it; float32 rounding by ~1e-6·√K).
 */
export function matmulProbeError(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  out: ArrayLike<number>,
  shape: { M: number; N: number; K: number; transposeA: boolean; transposeB: boolean },
  random: () => number,
  probes = 4,
): number {
  const { M, N, K, transposeA, transposeB } = shape;
  // op(A)[m][k] and op(B)[k][n] in their stored layouts: A is (M, K) or, transposed, (K, M); B (K, N) or (N, K).
  const opA = (m: number, k: number) => (transposeA ? a[k * M + m] : a[m * K + k]);
  const opB = (k: number, n: number) => (transposeB ? b[n * K + k] : b[k * N + n]);
  let worst = 0;
  for (let p = 0; p < probes; p++) {
    const r = Array.from({ length: N }, () => 2 * random() - 1);
    const br = new Float64Array(K);
    for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) br[k] += opB(k, n) * r[n];
    let scale = 0;
    let diff = 0;
    for (let m = 0; m < M; m++) {
      let expected = 0;
      for (let k = 0; k < K; k++) expected += opA(m, k) * br[k];
      let got = 0;
      for (let n = 0; n < N; n++) got += out[m * N + n] * r[n];
      scale = Math.max(scale, Math.abs(expected));
      diff = Math.max(diff, Number.isNaN(got) ? Infinity : Math.abs(got - expected));
    }
    worst = Math.max(worst, diff / Math.max(scale, 1e-30));
  }
  return worst;
}
