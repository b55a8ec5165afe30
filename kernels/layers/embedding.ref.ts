// CPU reference of kernels/layers/embedding (float64): out[n] = table[ids[n]] for table (V, C); the backward scatters
// dOut rows back onto the table rows of their ids.

export function embeddingForwardRef(a: {
  ids: ArrayLike<number>;
  table: ArrayLike<number>;
  N: number;
  V: number;
  C: number;
}): Float64Array {
  const { ids, table, N, C } = a;
  const out = new Float64Array(N * C);
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < C; c++) out[n * C + c] = table[ids[n] * C + c];
  }
  return out;
}

/** dTable (V, C) alone; the GPU launcher's accumulate flag adds it to what dTable held. */
export function embeddingBackwardRef(a: {
  ids: ArrayLike<number>;
  dOut: ArrayLike<number>;
  N: number;
  V: number;
  C: number;
}): Float64Array {
  const { ids, dOut, N, V, C } = a;
  const dTable = new Float64Array(V * C);
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < C; c++) dTable[ids[n] * C + c] += dOut[n * C + c];
  }
  return dTable;
}
