// CPU reference of kernels/util/gather-rows: the first `width` columns of each picked row of a (N, sourceStride) array.

export function gatherRowsRef(a: {
  source: ArrayLike<number>;
  sourceStride: number;
  rows: readonly number[];
  width: number;
}): Float32Array {
  const out = new Float32Array(a.rows.length * a.width);
  a.rows.forEach((row, b) => {
    for (let t = 0; t < a.width; t++) out[b * a.width + t] = a.source[row * a.sourceStride + t];
  });
  return out;
}
