// CPU reference of kernels/layers/rmsnorm (float64): HF LlamaRMSNorm over the rows of x (rows, cols).

export function rmsnormForwardRef(a: {
  x: ArrayLike<number>;
  weight: ArrayLike<number>;
  rows: number;
  cols: number;
  eps: number;
}): { out: Float64Array; rstd: Float64Array } {
  const { x, weight, rows, cols, eps } = a;
  const out = new Float64Array(rows * cols);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let sumSq = 0;
    for (let c = 0; c < cols; c++) sumSq += x[r * cols + c] ** 2;
    rstd[r] = 1 / Math.sqrt(sumSq / cols + eps);
    for (let c = 0; c < cols; c++) out[r * cols + c] = x[r * cols + c] * rstd[r] * weight[c];
  }
  return { out, rstd };
}

/** The gradients alone; the GPU launcher's accumulate flags add them to what dx and dWeight held. */
export function rmsnormBackwardRef(a: {
  x: ArrayLike<number>;
  weight: ArrayLike<number>;
  rstd: ArrayLike<number>;
  dOut: ArrayLike<number>;
  rows: number;
  cols: number;
}): { dx: Float64Array; dWeight: Float64Array } {
  const { x, weight, rstd, dOut, rows, cols } = a;
  const dx = new Float64Array(rows * cols);
  const dWeight = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const s = rstd[r];
    let dot = 0;
    for (let c = 0; c < cols; c++) dot += weight[c] * dOut[r * cols + c] * x[r * cols + c];
    const coef = (s * s * s * dot) / cols;
    for (let c = 0; c < cols; c++) {
      const k = r * cols + c;
      dx[k] = s * weight[c] * dOut[k] - coef * x[k];
      dWeight[c] += dOut[k] * x[k] * s;
    }
  }
  return { dx, dWeight };
}
