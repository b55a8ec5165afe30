// CPU reference of kernels/util/to-half: the host conversions uploads use (engine/half-float.ts), as 16-bit patterns
// with round to nearest even.
export { encodeHalf as toHalfRef } from '../../engine/half-float.ts';
