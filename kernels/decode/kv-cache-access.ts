// How the decode kernels load and store a KV cache of either storage: float32, or half precision (bf16 or f16, two
// values a u32 word: actor_rollout_ref.rollout.dtype), which holds twice the sequences in the same memory and
// reads half the bytes a decode step. The kernels index the cache in vectors of VW values (vecN: a vec4<f32> of a
// half cache is one vec2<u32>) and call loadK/loadV/storeK/storeV, which convert: arithmetic stays float32, and a
// value is rounded (to nearest even) once, when it is stored.
import type { ElementType } from '../../engine/kernel.ts';
import { type FloatDType, type Tensor, isHalf } from '../../engine/index.ts';
import { packPairSource, unpackPairSource } from '../util/half-weights.ts';

/** The storage element of a cache binding holding `width` values (width 4 for a half cache). */
export function cacheElementType(dtype: FloatDType, width: 1 | 4): ElementType {
  if (isHalf(dtype)) return 'vec2<u32>';
  return width === 4 ? 'vec4<f32>' : 'f32';
}

/** WGSL loadK/loadV(i) -> vector over bindings kCache and vCache, element i of `vector` values (`vector` is
 *  vec4<f32> for a half cache), and with `stores` storeK/storeV(i, x) (read_write bindings) and asStored(x), x as the
 *  cache holds it once stored (rounded for a half cache): a decode step attends its new key and value that way, so
 *  every key is attended as stored, as a prefill's are (through kv-cache-unpack), whichever call a token came in. */
export function cacheAccessSource(dtype: FloatDType, vector: string, stores: boolean): string {
  if (!isHalf(dtype)) {
    const loads =
      `fn loadK(i: u32) -> ${vector} { return kCache[i]; }\nfn loadV(i: u32) -> ${vector} { return vCache[i]; }\n` +
      `fn asStored(x: ${vector}) -> ${vector} { return x; }\n`;
    if (!stores) return loads;
    return `${loads}fn storeK(i: u32, x: ${vector}) { kCache[i] = x; }\nfn storeV(i: u32, x: ${vector}) { vCache[i] = x; }\n`;
  }
  const loads = `${unpackPairSource(dtype)}fn unpack4(w: vec2<u32>) -> vec4<f32> { return vec4<f32>(unpackPair(w.x), unpackPair(w.y)); }
fn loadK(i: u32) -> vec4<f32> { return unpack4(kCache[i]); }
fn loadV(i: u32) -> vec4<f32> { return unpack4(vCache[i]); }
`;
  if (!stores) return loads;
  return `${loads}${packPairSource(dtype)}fn pack4(x: vec4<f32>) -> vec2<u32> { return vec2<u32>(packPair(x.xy), packPair(x.zw)); }
fn storeK(i: u32, x: vec4<f32>) { kCache[i] = pack4(x); }
fn storeV(i: u32, x: vec4<f32>) { vCache[i] = pack4(x); }
fn asStored(x: vec4<f32>) -> vec4<f32> { return unpack4(pack4(x)); }
`;
}

/** The caches' shared storage: float32, or a half precision whose rows are whole vec4s (each cached head vector is
 *  then whole words, and a vec4 of one head never straddles two). */
export function cacheDtype(launcher: string, kCache: Tensor, vCache: Tensor, kvWidth: number): FloatDType {
  const dtype = kCache.dtype;
  if (vCache.dtype !== dtype || !(dtype === 'f32' || isHalf(dtype)))
    throw new Error(
      `${launcher}: kCache is ${kCache.dtype} and vCache ${vCache.dtype}, expected both f32, bf16 or f16`,
    );
  if (isHalf(dtype) && kvWidth % 4 !== 0)
    throw new Error(`${launcher}: a ${dtype} cache needs NKV·HS=${kvWidth} to be a multiple of 4`);
  return dtype;
}
