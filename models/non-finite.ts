// The first NaN or ±Infinity of a tensor, found on the host where weights are read from or written to files: a
// checkpoint holding one would poison every run that loads it, and a run that trained from one would be lost at
// its first save, so both refuse it naming the file, the tensor and the position.

/** Index of the first value of `values` that is NaN or ±Infinity, or -1. */
export function firstNonFinite(values: ArrayLike<number>): number {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) return i;
  return -1;
}

/** "tensor 'w' holds NaN at index 7 (row 1, column 3)": the flat index and, for a matrix, its row and column. */
export function describeNonFinite(
  name: string,
  values: ArrayLike<number>,
  index: number,
  shape: readonly number[],
): string {
  const columns = shape.length === 2 ? shape[1] : 0;
  const position = columns > 0 ? ` (row ${Math.floor(index / columns)}, column ${index % columns})` : '';
  return `tensor '${name}' holds ${values[index]} at index ${index}${position}`;
}
