// CPU reference (float64) for kernels/ppo/masked-stats: verl.utils.torch_functional masked_sum / masked_mean /
// masked_var / masked_whiten over a whole [B, T] tensor. The +1e-8 in every denominator and the Bessel factor
// applied after the biased mean are verl's, kept so the numbers agree to the last digit.

export interface MaskedMoments {
  sum: number;
  count: number;
  mean: number;
  /** Unbiased (n/(n-1)) masked variance, as verl's masked_var(unbiased=True). */
  variance: number;
}

export function maskedSum(values: ArrayLike<number>, mask: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) if (mask[i] !== 0) s += values[i] * mask[i];
  return s;
}

export function maskedMean(values: ArrayLike<number>, mask: ArrayLike<number>): number {
  let count = 0;
  for (let i = 0; i < mask.length; i++) count += mask[i];
  return maskedSum(values, mask) / (count + 1e-8);
}

/** Row-wise masked sum or mean of a [B, T] tensor (verl's axis=-1). */
export function maskedRowReduce(
  values: ArrayLike<number>,
  mask: ArrayLike<number>,
  B: number,
  T: number,
  mean: boolean,
): Float64Array {
  const out = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    let s = 0;
    let count = 0;
    for (let t = 0; t < T; t++) {
      const m = mask[b * T + t];
      if (m !== 0) s += values[b * T + t] * m;
      count += m;
    }
    out[b] = mean ? s / (count + 1e-8) : s;
  }
  return out;
}

export function maskedVar(values: ArrayLike<number>, mask: ArrayLike<number>, unbiased = true): number {
  const mean = maskedMean(values, mask);
  const centered = Array.from(values, (v) => (v - mean) ** 2);
  let variance = maskedMean(centered, mask);
  if (unbiased) {
    let count = 0;
    for (let i = 0; i < mask.length; i++) count += mask[i];
    if (count === 0) throw new Error('masked_var: At least one element in the mask has to be 1.');
    if (count === 1) throw new Error('masked_var: The sum of the mask is one, which can cause a division by zero.');
    variance *= count / (count - 1);
  }
  return variance;
}

export function maskedMoments(values: ArrayLike<number>, mask: ArrayLike<number>): MaskedMoments {
  let count = 0;
  for (let i = 0; i < mask.length; i++) count += mask[i];
  return { sum: maskedSum(values, mask), count, mean: maskedMean(values, mask), variance: maskedVar(values, mask) };
}

/** (v - mean)·rsqrt(var + 1e-8) everywhere (masked-out entries are whitened too, as in verl); optionally ·mask. */
export function maskedWhiten(
  values: ArrayLike<number>,
  mask: ArrayLike<number>,
  shiftMean = true,
  multiplyByMask = false,
): Float64Array {
  const mean = maskedMean(values, mask);
  const scale = 1 / Math.sqrt(maskedVar(values, mask) + 1e-8);
  return Float64Array.from(values, (v, i) => {
    const w = (v - mean) * scale + (shiftMean ? 0 : mean);
    return multiplyByMask ? w * mask[i] : w;
  });
}
