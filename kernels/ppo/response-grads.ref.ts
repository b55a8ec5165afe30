// CPU reference of kernels/ppo/response-grads: grads [B, T, 2] → dLogprobs, dEntropy [B, S], response token t at
// sequence position S − T − 1 + t, zeros elsewhere. A pure scatter: it has no gradient of its own.
export function scatterResponseGradsRef(
  grads: ArrayLike<number>,
  B: number,
  S: number,
  T: number,
): { dLogprobs: Float64Array; dEntropy: Float64Array } {
  const dLogprobs = new Float64Array(B * S);
  const dEntropy = new Float64Array(B * S);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const s = b * S + S - T - 1 + t;
      dLogprobs[s] = grads[2 * (b * T + t)];
      dEntropy[s] = grads[2 * (b * T + t) + 1];
    }
  }
  return { dLogprobs, dEntropy };
}
