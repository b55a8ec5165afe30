import kvCacheWriteSource from './kv-cache-write.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type FloatDType,
  foldWorkgroups,
  expectSize,
} from '../../engine/index.ts';
import { shaderSource, vectorElementType, widestVector, type VectorWidth } from '../util/rowwise.ts';
import { cacheAccessSource, cacheDtype, cacheElementType } from './kv-cache-access.ts';

const specs = new Map<string, KernelSpec>();

/** The spec for caches of `dtype` moved `width` values a lane (a half cache's rows are whole vec4s: width 4). */
function specFor(width: VectorWidth, dtype: FloatDType): KernelSpec {
  const key = `${width}/${dtype}`;
  let spec = specs.get(key);
  if (!spec) {
    spec = buildSpec(width, dtype);
    specs.set(key, spec);
  }
  return spec;
}

function buildSpec(width: VectorWidth, dtype: FloatDType): KernelSpec {
  return {
    name: `kv-cache-write/vec${width}${dtype === 'f32' ? '' : `-${dtype}`}`,
    source: shaderSource('kv-cache-write', cacheAccessSource(dtype, 'vecN', true) + kvCacheWriteSource, null, width),
    bindings: [
      { name: 'qkv', access: 'read', type: vectorElementType(width) },
      { name: 'kCache', access: 'read_write', type: cacheElementType(dtype, width) },
      { name: 'vCache', access: 'read_write', type: cacheElementType(dtype, width) },
    ],
    uniforms: [
      { name: 'rows', type: 'u32' },
      { name: 'Tnew', type: 'u32' },
      { name: 'capacity', type: 'u32' },
      { name: 'slotStart', type: 'u32' },
      { name: 'slotBase', type: 'u32' },
      { name: 'W', type: 'u32' },
      { name: 'kColumn', type: 'u32' },
      { name: 'kvWidth', type: 'u32' },
    ],
  };
}

export interface KvCacheWriteArgs {
  /** (B·Tnew, (NH + 2·NKV)·HS) after RoPE (and Qwen3's k norm). */
  qkv: Tensor;
  /** (B, capacity, NKV·HS) each, float32 or half precision (then NKV·HS a multiple of 4): rounded to nearest even. */
  kCache: Tensor;
  vCache: Tensor;
  B: number;
  Tnew: number;
  capacity: number;
  /** Cache slot of the first new row; the new rows fill [slotStart, slotStart + Tnew). */
  slotStart: number;
  NH: number;
  NKV: number;
  HS: number;
  /** Slots per cache window (B = 1; models/kv-cache.ts): the layer is bound a window at a time, one dispatch for each
   *  window the new slots reach. Absent: bound whole. */
  windowSlots?: number;
}

/** Writes k and v of Tnew new tokens per sequence into the cache slots [slotStart, slotStart + Tnew). */
export function kvCacheWrite(engine: Engine, a: KvCacheWriteArgs): void {
  const { qkv, kCache, vCache, B, Tnew, capacity, slotStart, NH, NKV, HS } = a;
  const kvWidth = NKV * HS;
  const W = (NH + 2 * NKV) * HS;
  const launcher = 'kvCacheWrite';
  if (slotStart + Tnew > capacity) {
    throw new Error(`${launcher}: slots [${slotStart}, ${slotStart + Tnew}) overrun the cache capacity ${capacity}`);
  }
  expectSize(launcher, 'qkv', qkv, B * Tnew * W, `[B·Tnew=${B}·${Tnew}, (NH+2·NKV)·HS=${W}]`);
  // The cache may hold more sequences than are being written (rows past B are left alone).
  for (const [what, t] of [
    ['kCache', kCache],
    ['vCache', vCache],
  ] as const) {
    expectSize(
      launcher,
      what,
      t,
      B * capacity * kvWidth,
      `[B=${B}, capacity=${capacity}, NKV·HS=${kvWidth}]`,
      'at least',
    );
  }
  const dtype = cacheDtype(launcher, kCache, vCache, kvWidth);
  const width = widestVector(kvWidth);
  const window = a.windowSlots ?? capacity;
  if (window < capacity && B !== 1)
    throw new Error(`${launcher}: a cache bound in windows of ${window} slots holds one row, got B=${B}`);
  for (let slotBase = Math.floor(slotStart / window) * window; slotBase < slotStart + Tnew; slotBase += window) {
    const slots = Math.min(window, capacity - slotBase);
    const bind = (t: Tensor) =>
      slots === capacity
        ? t
        : t.view(`${t.name}[${slotBase}:${slotBase + slots}]`, slotBase * kvWidth, [slots * kvWidth]);
    engine.dispatch(specFor(width, dtype), {
      bindings: { qkv, kCache: bind(kCache), vCache: bind(vCache) },
      uniforms: { rows: B, Tnew, capacity: slots, slotStart, slotBase, W, kColumn: NH * HS, kvWidth },
      workgroups: foldWorkgroups(Math.ceil((B * Tnew * kvWidth) / width / 256)),
    });
  }
}
