// CPU reference of the value head (float64): values[n] = hidden[n]·weight + bias[0].
// hidden: (N, C), weight: (C), bias: (1), values: (N).

export function valueHeadForwardRef(a: {
  hidden: ArrayLike<number>;
  weight: ArrayLike<number>;
  bias: ArrayLike<number>;
  N: number;
  C: number;
}): Float64Array {
  const { hidden, weight, bias, N, C } = a;
  const values = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    let dot = bias[0];
    for (let c = 0; c < C; c++) dot += hidden[n * C + c] * weight[c];
    values[n] = dot;
  }
  return values;
}

/** Gradients of Σ dValues·values. */
export function valueHeadBackwardRef(a: {
  hidden: ArrayLike<number>;
  weight: ArrayLike<number>;
  dValues: ArrayLike<number>;
  N: number;
  C: number;
}): { dHidden: Float64Array; dWeight: Float64Array; dBias: Float64Array } {
  const { hidden, weight, dValues, N, C } = a;
  const dHidden = new Float64Array(N * C);
  const dWeight = new Float64Array(C);
  const dBias = new Float64Array(1);
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < C; c++) {
      dHidden[n * C + c] = dValues[n] * weight[c];
      dWeight[c] += dValues[n] * hidden[n * C + c];
    }
    dBias[0] += dValues[n];
  }
  return { dHidden, dWeight, dBias };
}
