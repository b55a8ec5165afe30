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
