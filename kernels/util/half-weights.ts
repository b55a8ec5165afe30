// Half-precision weights (a frozen model's bf16 or f16 matrices) are stored two per 32-bit word, element 2i in
// the low half, and unpacked to float32 where a kernel reads them; arithmetic stays float32. bf16 unpacks by a
// 16-bit shift (no device feature), f16 by WGSL's unpack2x16float.
import type { HalfDType } from '../../engine/index.ts';

/** WGSL `unpackPair(w: u32) -> vec2<f32>`: the two values packed in word w, in element order. */
export function unpackPairSource(dtype: HalfDType): string {
  return dtype === 'bf16'
    ? 'fn unpackPair(w: u32) -> vec2<f32> { return bitcast<vec2<f32>>(vec2<u32>(w << 16u, w & 0xffff0000u)); }\n'
    : 'fn unpackPair(w: u32) -> vec2<f32> { return unpack2x16float(w); }\n';
}
