import decodeAttentionSource from './decode-attention.wgsl';
import decodeAttentionDimsSource from './decode-attention-dims.wgsl';
import decodeAttentionCombineSource from './decode-attention-combine.wgsl';
import ropeAngleSource from '../layers/rope-angle.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type FloatDType,
  chooseVariant,
  expectSize,
} from '../../engine/index.ts';
import { cacheAccessSource, cacheDtype, cacheElementType } from './kv-cache-access.ts';
import type { Variant } from '../../engine/variants.ts';
import { shaderSource } from '../util/rowwise.ts';
import { scratchTensor } from '../util/scratch.ts';
import { inverseFrequencyTable } from '../layers/rope.ts';

const MAX_HS = 128;

/** How a workgroup splits the work: lanes over the head dimension (one vec4 each, keys in turn; HS <= 32), or
 *  WG lanes over the keys (each a whole head, merged at the end), with the cache split over several workgroups
 *  when it is long (`split`: flash-decoding, a combine pass merges the splits). */
type Layout = { kind: 'dims' } | { kind: 'keys'; WG: number; split: boolean };

/** The largest head size the dims layout takes: a vec4 per lane of one 8-lane subgroup. */
const DIMS_MAX_HS = 32;

// lavapipe runs a workgroup as coroutines of one 8-lane SIMD vector and switches all of them at a barrier: one
// vector per workgroup is cheapest there, and lanes over the head dimension (a subgroup sum per key, no merge)
// beat lanes over the keys where the subgroup holds a head (HS <= 32; wider heads take keys-8); its 2 cores are
// busy with B·NKV workgroups, so the cache is never split.
// GPUs (`split`): 32 lanes splitting the keys, fewer when the merge state (lanes · NH/NKV · HS floats) would not fit
// workgroup memory. A decode step is bound by reading the cache (2·HS floats a slot for NH/NKV heads' ~4·HS FMAs
// each), so what matters is keeping enough loads in flight: one workgroup per (kv group, sequence) is B·NKV
// workgroups (8 for one Qwen3-0.6B sequence, on a GPU of 100+ compute units), each walking the whole cache. Long
// caches are therefore split into chunks of at least SPLIT_MIN_KEYS slots, up to SPLIT_TARGET_WORKGROUPS
// workgroups in all, each writing its partial softmax state, which a second dispatch merges; a short cache keeps
// one split and one dispatch.
const decodeAttentionVariants: readonly Variant<Layout>[] = [
  {
    name: 'dims',
    supported: (caps) => caps.deviceClass === 'cpu' && caps.subgroups && caps.subgroupMinSize >= 8,
    value: { kind: 'dims' },
  },
  { name: 'wg8', supported: (caps) => caps.deviceClass === 'cpu', value: { kind: 'keys', WG: 8, split: false } },
  { name: 'split', supported: (caps) => caps.deviceClass === 'gpu', value: { kind: 'keys', WG: 32, split: true } },
  // The GPUs' variant before split (never chosen): what tools/kernel-lab/decode-attention.ts measures split against.
  { name: 'wg32', supported: () => false, value: { kind: 'keys', WG: 32, split: false } },
];

/** Fewest cache slots a split takes: 8 keys a lane at 32 lanes, so the lane merge and the partial state it writes
 *  (NH/NKV·(HS + 4) floats) stay small next to the split's 2·HS floats of cache reads per slot. */
const SPLIT_MIN_KEYS = 256;
/** Workgroups a split decode aims for: a few per compute unit of a large GPU (~100-140), enough loads in flight to
 *  approach its memory bandwidth. */
const SPLIT_TARGET_WORKGROUPS = 1024;

/** Splits for `keys` cached slots of B·NKV (kv group, sequence) pairs. */
function splitCount(keys: number, B: number, NKV: number): number {
  return Math.max(1, Math.min(Math.ceil(keys / SPLIT_MIN_KEYS), Math.ceil(SPLIT_TARGET_WORKGROUPS / (B * NKV))));
}

const specs = new Map<string, KernelSpec>();

// decode-attention.wgsl's storeResult: the output itself (one split), or the split's partial softmax state.
const STORE_OUT =
  'fn storeResult(head: u32, d4: u32, split: u32, o: vec4<f32>, normalizer: f32, total: f32) { out[head * HS4 + d4] ' +
  '= o / normalizer; }\n';
const STORE_PARTIAL = `fn storeResult(head: u32, d4: u32, split: u32, o: vec4<f32>, normalizer: f32, total: f32) {
  let at = (head * params.splits + split) * (HS4 + 1u);
  partials[at + 1u + d4] = o;
  if (d4 == 0u) { partials[at] = vec4<f32>(total, normalizer, 0.0, 0.0); }
}
`;

/** WG = 0: the dims layout. split: write partial states to `partials` instead of `out`. */
function specFor(HS: number, REP: number, WG: number, rope: boolean, split: boolean, cache: FloatDType): KernelSpec {
  const key = `${HS}/${REP}/${WG}/${rope}/${split}/${cache}`;
  let spec = specs.get(key);
  if (!spec) {
    const consts = `const HS: u32 = ${HS}u;\nconst REP: u32 = ${REP}u;\nconst ROPE = ${rope};\n`;
    const body = WG ? decodeAttentionSource + (split ? STORE_PARTIAL : STORE_OUT) : decodeAttentionDimsSource;
    const access = cacheAccessSource(cache, 'vec4<f32>', true);
    spec = {
      name:
        `decode-attention/${WG ? `wg${WG}` : 'dims'}${rope ? '-rope' : ''}${split ? '-split' : ''}` +
        (cache === 'f32' ? '' : `-${cache}`),
      source: shaderSource('decode-attention', `${consts}${ropeAngleSource}\n${access}${body}`, null, 4),
      ...(WG ? { constants: { WG } } : { features: ['subgroups'] as const }),
      bindings: [
        { name: 'qkv', access: 'read', type: 'vec4<f32>' },
        // RoPE positions (B) and inverse frequencies (HS/2); unread without ROPE.
        { name: 'positions', access: 'read', type: 'i32' },
        { name: 'invFreq', access: 'read', type: 'vec4<f32>' },
        { name: 'kCache', access: 'read_write', type: cacheElementType(cache, 4) },
        { name: 'vCache', access: 'read_write', type: cacheElementType(cache, 4) },
        { name: 'keyMask', access: 'read', type: 'u32' },
        { name: split ? 'partials' : 'out', access: 'read_write', type: 'vec4<f32>' },
      ],
      uniforms: [
        { name: 'NKV', type: 'u32' },
        { name: 'W', type: 'u32' },
        { name: 'capacity', type: 'u32' },
        { name: 'slot', type: 'u32' },
        { name: 'maskBatchStride', type: 'u32' },
        { name: 'scale', type: 'f32' },
        /** Cache slots per split (workgroup z) and the number of splits. */
        { name: 'splitKeys', type: 'u32' },
        { name: 'splits', type: 'u32' },
        /** The dispatch's cache window (decode-attention.wgsl): its first slot, the end of its keys, its first split,
         *  and whether it holds the new slot. */
        { name: 'keyBase', type: 'u32' },
        { name: 'keyEnd', type: 'u32' },
        { name: 'splitBase', type: 'u32' },
        { name: 'storesNew', type: 'u32' },
      ],
    };
    specs.set(key, spec);
  }
  return spec;
}

function combineSpec(HS: number): KernelSpec {
  const key = `combine/${HS}`;
  let spec = specs.get(key);
  if (!spec) {
    spec = {
      name: 'decode-attention/combine',
      source: `const HS: u32 = ${HS}u;\n${decodeAttentionCombineSource}`,
      bindings: [
        { name: 'partials', access: 'read', type: 'vec4<f32>' },
        { name: 'out', access: 'read_write', type: 'vec4<f32>' },
      ],
      uniforms: [
        { name: 'NH', type: 'u32' },
        { name: 'splits', type: 'u32' },
      ],
    };
    specs.set(key, spec);
  }
  return spec;
}

export interface DecodeAttentionArgs {
  /** (B, (NH + 2·NKV)·HS) the new token of each sequence, after RoPE unless `rope` is given. */
  qkv: Tensor;
  /** Rotate q and the new k here instead of in a rope dispatch before (HS a multiple of 8). */
  rope?: { positions: Tensor<'i32'>; theta: number };
  /** (≥ B, capacity, NKV·HS) each, float32 or half precision (bf16/f16, the rollout's rollout.dtype); slot `slot`
   *  is overwritten with the new k, v (rounded to the cache's precision). */
  kCache: Tensor;
  vCache: Tensor;
  /** (≥ B, maskBatchStride) u32. */
  keyMask: Tensor<'u32'>;
  /** (B, NH·HS) */
  out: Tensor;
  B: number;
  NH: number;
  NKV: number;
  HS: number;
  capacity: number;
  slot: number;
  maskBatchStride: number;
  scale: number;
  /** The rows the split count is chosen for (B when absent): a decode group of a larger batch passes the batch's, so
   *  that each row's splits, and so its sums, do not depend on the grouping (models/incremental-decoder.ts). */
  splitRows?: number;
  /** Slots per cache window (B = 1): the row's cache layer is above one binding, so it is bound one window of this
   *  many slots at a time (models/kv-cache.ts), each window's keys in splits of their own that the combine pass
   *  merges. Absent: the cache binds whole. */
  windowSlots?: number;
}

/** The dispatches of one decode step: per cache window attended (one, from slot 0, where the cache binds whole) its
 *  first slot, the end of its keys and its first split; all in splits of `splitKeys` slots, `splits` in all. */
export function decodeSplits(
  keys: number,
  splits: number,
  windowSlots: number | undefined,
): { splitKeys: number; splits: number; windows: { keyBase: number; keyEnd: number; splitBase: number }[] } {
  const window = windowSlots ?? keys;
  const splitKeys = Math.min(Math.ceil(keys / splits), window);
  const windows: { keyBase: number; keyEnd: number; splitBase: number }[] = [];
  let total = 0;
  for (let keyBase = 0; keyBase < keys; keyBase += window) {
    const keyEnd = Math.min(keyBase + window, keys);
    windows.push({ keyBase, keyEnd, splitBase: total });
    total += Math.ceil((keyEnd - keyBase) / splitKeys);
  }
  return { splitKeys, splits: total, windows };
}

/** Whether decodeAttention handles this head size (vec4 head vectors; larger heads take the general attention). */
export function decodeAttentionSupports(HS: number): boolean {
  return HS % 4 === 0 && HS <= MAX_HS;
}

/** Whether decodeAttention can apply RoPE itself (each half head a whole number of vec4s). */
export function decodeAttentionFusesRope(HS: number): boolean {
  return decodeAttentionSupports(HS) && HS % 8 === 0;
}

/** Throws unless `slot` is inside the cache and its mask, and the caches and key mask hold B sequences (the
 *  checks of every decode-step launcher that writes the new k, v at `slot` and attends over [0, slot]). */
export function expectDecodeCache(
  launcher: string,
  a: Pick<
    DecodeAttentionArgs,
    'kCache' | 'vCache' | 'keyMask' | 'B' | 'NKV' | 'HS' | 'capacity' | 'slot' | 'maskBatchStride'
  >,
): void {
  const { B, capacity, slot, maskBatchStride } = a;
  if (slot >= capacity) throw new Error(`${launcher}: slot ${slot} is outside the cache capacity ${capacity}`);
  if (maskBatchStride < slot + 1)
    throw new Error(`${launcher}: maskBatchStride ${maskBatchStride} does not cover slot ${slot}`);
  const kvWidth = a.NKV * a.HS;
  cacheDtype(launcher, a.kCache, a.vCache, kvWidth);
  const cacheShape = `[B=${B}, capacity=${capacity}, NKV·HS=${kvWidth}]`;
  expectSize(launcher, 'kCache', a.kCache, B * capacity * kvWidth, cacheShape, 'at least');
  expectSize(launcher, 'vCache', a.vCache, B * capacity * kvWidth, cacheShape, 'at least');
  expectSize(
    launcher,
    'keyMask',
    a.keyMask,
    B * maskBatchStride,
    `[B=${B}, maskBatchStride=${maskBatchStride}]`,
    'at least',
  );
}

/** Stores the new k, v at `slot` and attends the new queries to slots [0, slot] of each sequence's cache. */
export function decodeAttention(engine: Engine, a: DecodeAttentionArgs): void {
  const { qkv, kCache, vCache, keyMask, out, B, NH, NKV, HS, capacity, slot, maskBatchStride, scale, rope } = a;
  const launcher = 'decodeAttention';
  if (!decodeAttentionSupports(HS))
    throw new Error(`${launcher}: HS=${HS} must be a multiple of 4 and at most ${MAX_HS}`);
  if (rope && !decodeAttentionFusesRope(HS))
    throw new Error(`${launcher}: RoPE fused here needs HS=${HS} to be a multiple of 8`);
  if (rope) expectSize(launcher, 'positions', rope.positions, B, `[B=${B}]`);
  if (NH % NKV !== 0) throw new Error(`${launcher}: NH=${NH} is not a multiple of NKV=${NKV}`);
  expectDecodeCache(launcher, a);
  const W = (NH + 2 * NKV) * HS;
  expectSize(launcher, 'qkv', qkv, B * W, `[B=${B}, (NH+2·NKV)·HS=${W}]`);
  expectSize(launcher, 'out', out, B * NH * HS, `[B=${B}, NH·HS=${NH * HS}]`);
  const REP = NH / NKV;
  const windowSlots = a.windowSlots;
  if (windowSlots !== undefined && B !== 1)
    throw new Error(`${launcher}: a cache bound in windows of ${windowSlots} slots holds one row, got B=${B}`);
  const chosen = chooseVariant('decode-attention', decodeAttentionVariants, engine.caps, engine.knobs).value;
  // Windows need the partial states: on CPU devices each window is one split of eight lanes.
  const layout: Layout =
    windowSlots !== undefined && chosen.kind === 'dims' ? { kind: 'keys', WG: 8, split: false } : chosen;
  let WG = layout.kind === 'dims' ? (HS <= DIMS_MAX_HS ? 0 : 8) : layout.WG;
  while (WG > 1 && WG * REP * (HS + 2) * 4 > engine.caps.maxComputeWorkgroupStorageSize) WG /= 2;
  const splitsFor = (keys: number) =>
    layout.kind === 'keys' && layout.split ? splitCount(keys, Math.max(B, a.splitRows ?? B), NKV) : 1;
  const plan = decodeSplits(slot + 1, splitsFor(slot + 1), windowSlots);
  // Sized for the most splits this cache can take, so one scratch tensor serves a whole generation.
  const partials =
    plan.splits > 1
      ? scratchTensor(engine, 'decode-attention.partials', [
          B * NH * decodeSplits(capacity, splitsFor(capacity), windowSlots).splits * (HS / 4 + 1) * 4,
        ])
      : null;
  // Without RoPE, qkv fills the two rope slots (never read).
  const cache = cacheDtype(launcher, kCache, vCache, NKV * HS);
  const spec = specFor(HS, REP, WG, rope !== undefined, partials !== null, cache);
  const kvWidth = NKV * HS;
  for (const { keyBase, keyEnd, splitBase } of plan.windows) {
    const slots = windowSlots === undefined ? capacity : Math.min(windowSlots, capacity - keyBase);
    const window = (t: Tensor) =>
      windowSlots === undefined
        ? t
        : t.view(`${t.name}[${keyBase}:${keyBase + slots}]`, keyBase * kvWidth, [slots * kvWidth]);
    engine.dispatch(spec, {
      bindings: {
        qkv,
        kCache: window(kCache),
        vCache: window(vCache),
        keyMask,
        ...(partials ? { partials } : { out }),
        positions: rope?.positions ?? keyMask,
        invFreq: rope ? inverseFrequencyTable(engine, HS, rope.theta) : qkv,
      },
      uniforms: {
        NKV,
        W,
        capacity: slots,
        slot,
        maskBatchStride,
        scale,
        splitKeys: plan.splitKeys,
        splits: plan.splits,
        keyBase,
        keyEnd,
        splitBase,
        storesNew: keyEnd === slot + 1 ? 1 : 0,
      },
      workgroups: [NKV, B, Math.ceil((keyEnd - keyBase) / plan.splitKeys)],
    });
  }
  if (partials) {
    engine.dispatch(combineSpec(HS), {
      bindings: { partials, out },
      uniforms: { NH, splits: plan.splits },
      workgroups: [NH, B],
    });
  }
}
