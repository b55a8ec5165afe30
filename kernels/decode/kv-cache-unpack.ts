import kvCacheUnpackSource from './kv-cache-unpack.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type HalfDType,
  foldWorkgroups,
  expectSize,
  isHalf,
} from '../../engine/index.ts';
import { cacheAccessSource, cacheDtype, cacheElementType } from './kv-cache-access.ts';

const specs = new Map<HalfDType, KernelSpec>();

function specFor(dtype: HalfDType): KernelSpec {
  let spec = specs.get(dtype);
  if (!spec) {
    spec = {
      name: `kv-cache-unpack/${dtype}`,
      source: cacheAccessSource(dtype, 'vec4<f32>', false) + kvCacheUnpackSource,
      bindings: [
        { name: 'kCache', access: 'read', type: cacheElementType(dtype, 4) },
        { name: 'vCache', access: 'read', type: cacheElementType(dtype, 4) },
        { name: 'k', access: 'read_write', type: 'vec4<f32>' },
        { name: 'v', access: 'read_write', type: 'vec4<f32>' },
      ],
      uniforms: [
        { name: 'rows', type: 'u32' },
        { name: 'Tk', type: 'u32' },
        { name: 'capacity', type: 'u32' },
        { name: 'kvWidth', type: 'u32' },
      ],
    };
    specs.set(dtype, spec);
  }
  return spec;
}

export interface KvCacheUnpackArgs {
  /** (≥ B, capacity, NKV·HS) each, bf16 or f16. */
  kCache: Tensor;
  vCache: Tensor;
  /** (B, Tk, NKV·HS) float32 each. */
  k: Tensor;
  v: Tensor;
  B: number;
  Tk: number;
  capacity: number;
  kvWidth: number;
}

/** k, v = slots [0, Tk) of the first B sequences of a half-precision cache, as float32 (exact). */
export function kvCacheUnpack(engine: Engine, a: KvCacheUnpackArgs): void {
  const { kCache, vCache, k, v, B, Tk, capacity, kvWidth } = a;
  const launcher = 'kvCacheUnpack';
  const dtype = cacheDtype(launcher, kCache, vCache, kvWidth);
  if (!isHalf(dtype)) throw new Error(`${launcher}: kCache ${kCache.name} is ${dtype}, expected bf16 or f16`);
  if (Tk > capacity) throw new Error(`${launcher}: Tk=${Tk} slots exceed the cache capacity ${capacity}`);
  const cacheShape = `[B=${B}, capacity=${capacity}, NKV·HS=${kvWidth}]`;
  expectSize(launcher, 'kCache', kCache, B * capacity * kvWidth, cacheShape, 'at least');
  expectSize(launcher, 'vCache', vCache, B * capacity * kvWidth, cacheShape, 'at least');
  expectSize(launcher, 'k', k, B * Tk * kvWidth, `[B=${B}, Tk=${Tk}, NKV·HS=${kvWidth}]`);
  expectSize(launcher, 'v', v, B * Tk * kvWidth, `[B=${B}, Tk=${Tk}, NKV·HS=${kvWidth}]`);
  engine.dispatch(specFor(dtype), {
    bindings: { kCache, vCache, k, v },
    uniforms: { rows: B, Tk, capacity, kvWidth },
    workgroups: foldWorkgroups(Math.ceil((B * Tk * kvWidth) / 4 / 256)),
  });
}
