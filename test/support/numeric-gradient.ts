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
