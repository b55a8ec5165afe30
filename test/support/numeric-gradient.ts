// Central differences in float64, the outside truth for every reference backward.

/** d f / d x for every element of x (each perturbed in place, then restored). */
export function numericGradient(x: Float64Array, f: () => number, h = 1e-6): Float64Array {
  const grad = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const saved = x[i];
    x[i] = saved + h;
    const plus = f();
    x[i] = saved - h;
    const minus = f();
    x[i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

/**
 * Largest error of `analytic` against numericGradient(x, f, h), each relative to max(floor, |numeric|): floor 1 for
 * gradients of order one, a small floor where tiny gradients must match relatively too.
 */
export function numericGradientError(
  x: Float64Array,
  f: () => number,
  analytic: ArrayLike<number>,
  { h = 1e-6, floor = 1 }: { h?: number; floor?: number } = {},
): number {
  const numeric = numericGradient(x, f, h);
  let worst = 0;
  for (let i = 0; i < x.length; i++)
    worst = Math.max(worst, Math.abs(numeric[i] - analytic[i]) / Math.max(floor, Math.abs(numeric[i])));
  return worst;
}
