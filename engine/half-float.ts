// 16-bit float formats as stored in checkpoints and in half-precision weight tensors: bfloat16 (the top half
// of a float32) and IEEE binary16. Conversions round to nearest even, as PyTorch's .to(dtype) does.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f32 → bfloat16 bits, round to nearest even; NaN stays a quiet NaN of the same sign. */
export function f32ToBf16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0];
  if ((b & 0x7fffffff) > 0x7f800000) return ((b >>> 16) & 0x8000) | 0x7fc0;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16BitsToF32(h: number): number {
  u32[0] = h << 16;
  return f32[0];
}

/** f32 → IEEE half bits, round to nearest even, overflow to ±inf, gradual underflow to subnormals. */
export function f32ToF16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Below 2^-25 even the smallest subnormal (2^-24) is more than twice away: rounds to zero.
    if (e < -10) return sign;
    const full = mant | 0x800000;
    const shift = 14 - e;
    const rem = full & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    let r = full >>> shift;
    if (rem > half || (rem === half && r & 1)) r++;
    return sign | r;
  }
  let r = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent, up to infinity.
  if (rem > 0x1000 || (rem === 0x1000 && r & 1)) r++;
  return sign | r;
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** The two 16-bit storage formats of weight tensors. */
export type HalfDType = 'bf16' | 'f16';

/** `values` rounded to `dtype`, as 16-bit patterns, padded with a zero to an even count (buffers are written in
 *  4-byte words). */
export function encodeHalf(dtype: HalfDType, values: ArrayLike<number>): Uint16Array {
  const convert = dtype === 'bf16' ? f32ToBf16Bits : f32ToF16Bits;
  const bits = new Uint16Array(values.length + (values.length % 2));
  for (let i = 0; i < values.length; i++) bits[i] = convert(values[i]);
  return bits;
}

/** The float32 values of the first `count` 16-bit patterns in `bits`. */
export function decodeHalf(dtype: HalfDType, bits: Uint16Array, count = bits.length): Float32Array {
  const out = new Float32Array(count);
  if (dtype === 'bf16') {
    const words = new Uint32Array(out.buffer);
    for (let i = 0; i < count; i++) words[i] = bits[i] << 16;
  } else {
    for (let i = 0; i < count; i++) out[i] = f16BitsToF32(bits[i]);
  }
  return out;
}

/** `values` as `dtype` would store them (float32 values, each rounded to the nearest representable one). */
export function roundToHalf(dtype: HalfDType, values: ArrayLike<number>): Float32Array {
  return decodeHalf(dtype, encodeHalf(dtype, values), values.length);
}
