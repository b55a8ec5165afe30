// Half-precision values (a frozen model's bf16 or f16 matrices, the rollout's half-precision KV cache) are stored
// two per 32-bit word, element 2i in the low half, and unpacked to float32 where a kernel reads them; arithmetic
// stays float32. bf16 unpacks by a 16-bit shift (no device feature), f16 by WGSL's unpack2x16float; packing rounds
// to nearest even (to-half.wgsl's toHalf, as PyTorch's .to(dtype)).
import type { HalfDType } from '../../engine/index.ts';
import { toHalfFunctionSource } from './to-half.ts';

/** WGSL `unpackPair(w: u32) -> vec2<f32>`: the two values packed in word w, in element order. */
export function unpackPairSource(dtype: HalfDType): string {
  return dtype === 'bf16'
    ? 'fn unpackPair(w: u32) -> vec2<f32> { return bitcast<vec2<f32>>(vec2<u32>(w << 16u, w & 0xffff0000u)); }\n'
    : 'fn unpackPair(w: u32) -> vec2<f32> { return unpack2x16float(w); }\n';
}

/** WGSL `packPair(x: vec2<f32>) -> u32`: x.x and x.y rounded to `dtype`, x.x in the low half (unpackPair's inverse
 *  on values a half holds exactly). */
export function packPairSource(dtype: HalfDType): string {
  return `${toHalfFunctionSource(dtype)}fn packPair(x: vec2<f32>) -> u32 { return toHalf(x.x) | (toHalf(x.y) << 16u); }\n`;
}
