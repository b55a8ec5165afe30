// CPU reference of the 8-bit optimizer (float64 arithmetic, the quantizer's midpoints in float32 as bitsandbytes
// forms them): a port of bitsandbytes' kOptimizerStatic8bit2StateBlockwise for ADAM (csrc/kernels.cu, 95f9af30) and
// its quantize_2D. Updates params, codes and absmax in place; codes are one byte per element (bitsandbytes' uint8
// state1/state2), the kernel's words unpacked.
import { OPTIMIZER_8BIT_BLOCK } from '../../engine/dynamic-map.ts';
import type { AdamwHyperparameters } from './adamw.ts';

/** bitsandbytes' quantize_2D over a sorted 256-value code: the index stored for x (a moment over its block's absmax).
 *  `lowest` is what the search takes below code[0]: -1 for the signed code, 0 for the unsigned one. */
export function quantize2dRef(code: ArrayLike<number>, x: number, lowest: number): number {
  let pivot = 127;
  let upperPivot = 255;
  let lowerPivot = 0;
  let lower = lowest;
  let upper = 1;
  let val = code[127];
  for (let i = 64; i > 0; i >>= 1) {
    if (x > val) {
      lowerPivot = pivot;
      lower = val;
      pivot += i;
    } else {
      upperPivot = pivot;
      upper = val;
      pivot -= i;
    }
    val = code[pivot];
  }
  if (x > val) return x > Math.fround((upper + val) * 0.5) ? upperPivot : pivot;
  return x < Math.fround((lower + val) * 0.5) ? lowerPivot : pivot;
}

const signBit = (x: number) => x < 0 || Object.is(x, -0);

export interface Adamw8bitRefArgs extends AdamwHyperparameters {
  params: Float64Array;
  grads: ArrayLike<number>;
  /** One code per element. */
  state1: Uint8Array;
  state2: Uint8Array;
  absmax1: Float64Array;
  absmax2: Float64Array;
  /** The signed code (first moment) and the unsigned one (second). */
  code1: ArrayLike<number>;
  code2: ArrayLike<number>;
  normSquared: number;
}

/** A non-finite normSquared leaves everything as it was, as the kernel does (bitsandbytes zeroes the moments of a
 *  non-finite gradient element instead; here the run stops on it). The m/v values each element ended with, before
 *  quantization, come back for bounds on the codes. */
export function adamw8bitStepRef(a: Adamw8bitRefArgs): { m: Float64Array; v: Float64Array } {
  const { params, grads, state1, state2, absmax1, absmax2, code1, code2, beta1, beta2, step } = a;
  const n = params.length;
  const m = new Float64Array(n);
  const v = new Float64Array(n);
  if (!Number.isFinite(a.normSquared)) return { m, v };
  const gradScale = a.gradScale ?? 1;
  const norm = Math.abs(gradScale) * Math.sqrt(a.normSquared);
  const clip = a.maxNorm > 0 ? Math.min(1, a.maxNorm / (norm + 1e-6)) : 1;
  const correction1 = 1 - beta1 ** step;
  const correction2 = Math.sqrt(1 - beta2 ** step);
  const stepSize = (-a.lr * correction2) / correction1;
  const B = OPTIMIZER_8BIT_BLOCK;
  for (let block = 0; block * B < n; block++) {
    let max1 = 0;
    let max2 = 0;
    // The whole block, the elements past n as bitsandbytes loads them (g 0, codes 128 and 0).
    for (let i = block * B; i < (block + 1) * B; i++) {
      const valid = i < n;
      const g = valid ? grads[i] * gradScale * clip : 0;
      const s2 = code2[valid ? state2[i] : 0] * absmax2[block] * beta2 + (1 - beta2) * g * g;
      const s1 = code1[valid ? state1[i] : 128] * absmax1[block] * beta1 + (1 - beta1) * g;
      max1 = Math.max(max1, Math.abs(s1));
      max2 = Math.max(max2, Math.abs(s2));
      if (valid) [m[i], v[i]] = [s1, s2];
    }
    absmax1[block] = max1;
    absmax2[block] = max2;
    for (let i = block * B; i < Math.min(n, (block + 1) * B); i++) {
      params[i] += stepSize * (m[i] / (Math.sqrt(v[i]) + correction2 * a.eps));
      if (a.weightDecay > 0) params[i] *= 1 - a.lr * a.weightDecay;
      // A zero absmax makes bitsandbytes' quotient NaN, which its search sends to index 0.
      let c1 = max1 > 0 ? quantize2dRef(code1, m[i] / max1, -1) : 0;
      if (signBit(code1[c1]) !== signBit(m[i])) c1 = (c1 + (m[i] > 0 ? 1 : 255)) & 0xff;
      state1[i] = c1;
      state2[i] = max2 > 0 ? quantize2dRef(code2, v[i] / max2, 0) : 0;
    }
  }
  return { m, v };
}
