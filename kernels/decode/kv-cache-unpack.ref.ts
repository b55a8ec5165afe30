// CPU reference of kernels/decode/kv-cache-unpack: slots [0, Tk) of the first B sequences of a cache (B', capacity,
// kvWidth), its half-precision values as float32 (engine/half-float.ts decodes them exactly), compacted to
// (B, Tk, kvWidth). A copy used only at inference: there is no backward.
export function kvCacheUnpackRef(a: {
  cache: ArrayLike<number>;
  B: number;
  Tk: number;
  capacity: number;
  kvWidth: number;
}): Float64Array {
  const { cache, B, Tk, capacity, kvWidth } = a;
  const out = new Float64Array(B * Tk * kvWidth);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < Tk * kvWidth; i++) out[b * Tk * kvWidth + i] = cache[b * capacity * kvWidth + i];
  }
  return out;
}
