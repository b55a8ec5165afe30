// CPU reference of kernels/util/from-half: the host conversion downloads use (engine/half-float.ts), 16-bit patterns
// to float32 values.
export { decodeHalf as fromHalfRef } from '../../engine/half-float.ts';
