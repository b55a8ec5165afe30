// CPU reference of the deterministic reductions (float64).

export function weightedSumRef(a: { values: ArrayLike<number>; weights: ArrayLike<number>; n: number }): number {
  let sum = 0;
  for (let i = 0; i < a.n; i++) sum += a.values[i] * a.weights[i];
  return sum;
}
