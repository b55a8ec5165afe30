// CPU reference for kernels/ppo/response-values: verl reads the critic's value of response token t at the position
// before it (values[:, -T-1:-1]), and the backward scatters the gradient back there.

export function gatherResponseValuesRef(sequence: ArrayLike<number>, B: number, S: number, T: number): Float64Array {
  return Float64Array.from({ length: B * T }, (_, i) => sequence[Math.floor(i / T) * S + S - T - 1 + (i % T)]);
}

export function scatterResponseValueGradsRef(
  response: ArrayLike<number>,
  B: number,
  S: number,
  T: number,
): Float64Array {
  const out = new Float64Array(B * S);
  for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) out[b * S + S - T - 1 + t] = response[b * T + t];
  return out;
}
