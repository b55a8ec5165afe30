// CPU reference of kernels/util/clear-ranges: data with every [start, end) range zeroed.

export function clearRangesRef(a: {
  data: ArrayLike<number>;
  ranges: readonly (readonly [number, number])[];
}): Float64Array {
  const out = Float64Array.from(a.data);
  for (const [start, end] of a.ranges) out.fill(0, start, end);
  return out;
}
