// CPU reference of kernels/util/transpose (float64): out (cols, rows) = x (rows, cols)ᵀ.

export function transposeRef(a: { x: ArrayLike<number>; rows: number; cols: number }): Float64Array {
  const { x, rows, cols } = a;
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out[c * rows + r] = x[r * cols + c];
  }
  return out;
}
