// CPU reference of kernels/layers/swiglu (float64): out = silu(gate) * up on gateUp (rows, 2I), gate columns first.

function sigmoid(g: number): number {
  return 1 / (1 + Math.exp(-g));
}

/** out (rows, I). */
export function swigluForwardRef(a: { gateUp: ArrayLike<number>; rows: number; I: number }): Float64Array {
  const { gateUp, rows, I } = a;
  const out = new Float64Array(rows * I);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < I; i++) {
      const g = gateUp[r * 2 * I + i];
      out[r * I + i] = g * sigmoid(g) * gateUp[r * 2 * I + I + i];
    }
  }
  return out;
}

/** dGateUp (rows, 2I). */
export function swigluBackwardRef(a: {
  gateUp: ArrayLike<number>;
  dOut: ArrayLike<number>;
  rows: number;
  I: number;
}): Float64Array {
  const { gateUp, dOut, rows, I } = a;
  const dGateUp = new Float64Array(rows * 2 * I);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < I; i++) {
      const g = gateUp[r * 2 * I + i];
      const u = gateUp[r * 2 * I + I + i];
      const d = dOut[r * I + i];
      const s = sigmoid(g);
      dGateUp[r * 2 * I + i] = d * u * s * (1 + g * (1 - s));
      dGateUp[r * 2 * I + I + i] = d * g * s;
    }
  }
  return dGateUp;
}
