// CPU reference for kernels/row-scale: values[b, t] · scale[b].

export function rowScaleRef(values: ArrayLike<number>, scale: ArrayLike<number>, B: number, T: number): Float64Array {
  return Float64Array.from({ length: B * T }, (_, i) => values[i] * scale[Math.floor(i / T)]);
}
