// CPU reference of kernels/decode/kv-cache-write: the k and v sections of qkv (B·Tnew, (NH+2·NKV)·HS) copied into
// kCache, vCache (B, capacity, NKV·HS) at slots [slotStart, slotStart + Tnew); other slots keep their values.
// A pure copy used only at inference: there is no backward.
import type { KvCacheWriteArgs } from './kv-cache-write.ts';

type Dims = Omit<KvCacheWriteArgs, 'qkv' | 'kCache' | 'vCache'>;

export function kvCacheWriteRef(
  a: Dims & { qkv: ArrayLike<number>; kCache: ArrayLike<number>; vCache: ArrayLike<number> },
): { kCache: Float64Array; vCache: Float64Array } {
  const { B, Tnew, capacity, slotStart, NH, NKV, HS } = a;
  const kvWidth = NKV * HS;
  const W = (NH + 2 * NKV) * HS;
  const kCache = Float64Array.from(a.kCache);
  const vCache = Float64Array.from(a.vCache);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < Tnew; t++) {
      const source = (b * Tnew + t) * W;
      const target = (b * capacity + slotStart + t) * kvWidth;
      for (let c = 0; c < kvWidth; c++) {
        kCache[target + c] = a.qkv[source + NH * HS + c];
        vCache[target + c] = a.qkv[source + (NH + NKV) * HS + c];
      }
    }
  }
  return { kCache, vCache };
}
