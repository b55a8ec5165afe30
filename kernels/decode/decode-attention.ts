import decodeAttentionSource from './decode-attention.wgsl';
import decodeAttentionDimsSource from './decode-attention-dims.wgsl';
import ropeAngleSource from '../layers/rope-angle.wgsl';
import { type Engine, type Tensor, type KernelSpec, chooseVariant, expectSize } from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { shaderSource } from '../util/rowwise.ts';
import { inverseFrequencyTable } from '../layers/rope.ts';

const MAX_HS = 128;

/** How a workgroup splits the work: lanes over the head dimension (one vec4 each, keys in turn; HS <= 32), or
 *  WG lanes over the keys (each a whole head, merged at the end). */
type Layout = { kind: 'dims' } | { kind: 'keys'; WG: number };

/** The largest head size the dims layout takes: a vec4 per lane of one 8-lane subgroup. */
const DIMS_MAX_HS = 32;

// lavapipe runs a workgroup as coroutines of one 8-lane SIMD vector and switches all of them at a barrier: one
// vector per workgroup is cheapest there, and lanes over the head dimension (a subgroup sum per key, no merge)
// beat lanes over the keys where the subgroup holds a head (HS <= 32; wider heads take keys-8). GPUs get 32
// lanes splitting the keys, fewer when the merge state (lanes · NH/NKV · HS floats) would not fit workgroup memory.
const decodeAttentionVariants: readonly Variant<Layout>[] = [
  { name: 'dims', supported: (caps) => caps.deviceClass === 'cpu' && caps.subgroups && caps.subgroupMinSize >= 8, value: { kind: 'dims' } },
  { name: 'wg8', supported: (caps) => caps.deviceClass === 'cpu', value: { kind: 'keys', WG: 8 } },
  { name: 'wg32', supported: () => true, value: { kind: 'keys', WG: 32 } },
];

const specs = new Map<string, KernelSpec>();

/** WG = 0: the dims layout. */
function specFor(HS: number, REP: number, WG: number, rope: boolean): KernelSpec {
  const key = `${HS}/${REP}/${WG}/${rope}`;
  let spec = specs.get(key);
  if (!spec) {
    const consts = `const HS: u32 = ${HS}u;\nconst REP: u32 = ${REP}u;\nconst ROPE = ${rope};\n`;
    spec = {
      name: `decode-attention/${WG ? `wg${WG}` : 'dims'}${rope ? '-rope' : ''}`,
      source: shaderSource('decode-attention', `${consts}${ropeAngleSource}\n${WG ? decodeAttentionSource : decodeAttentionDimsSource}`, null, 4),
      ...(WG ? { constants: { WG } } : { features: ['subgroups'] as const }),
      bindings: [
        { name: 'qkv', access: 'read', type: 'vec4<f32>' },
        // RoPE positions (B) and inverse frequencies (HS/2); unread without ROPE.
        { name: 'positions', access: 'read', type: 'i32' },
        { name: 'invFreq', access: 'read', type: 'vec4<f32>' },
        { name: 'kCache', access: 'read_write', type: 'vec4<f32>' },
        { name: 'vCache', access: 'read_write', type: 'vec4<f32>' },
        { name: 'keyMask', access: 'read', type: 'u32' },
        { name: 'out', access: 'read_write', type: 'vec4<f32>' },
      ],
      uniforms: [
        { name: 'NKV', type: 'u32' },
        { name: 'W', type: 'u32' },
        { name: 'capacity', type: 'u32' },
        { name: 'slot', type: 'u32' },
        { name: 'maskBatchStride', type: 'u32' },
        { name: 'scale', type: 'f32' },
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
  /** (≥ B, capacity, NKV·HS) each; slot `slot` is overwritten with the new k, v. */
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
export function expectDecodeCache(launcher: string, a: Pick<DecodeAttentionArgs, 'kCache' | 'vCache' | 'keyMask' | 'B' | 'NKV' | 'HS' | 'capacity' | 'slot' | 'maskBatchStride'>): void {
  const { B, capacity, slot, maskBatchStride } = a;
  if (slot >= capacity) throw new Error(`${launcher}: slot ${slot} is outside the cache capacity ${capacity}`);
  if (maskBatchStride < slot + 1) throw new Error(`${launcher}: maskBatchStride ${maskBatchStride} does not cover slot ${slot}`);
  const kvWidth = a.NKV * a.HS;
  const cacheShape = `[B=${B}, capacity=${capacity}, NKV·HS=${kvWidth}]`;
  expectSize(launcher, 'kCache', a.kCache, B * capacity * kvWidth, cacheShape, 'at least');
  expectSize(launcher, 'vCache', a.vCache, B * capacity * kvWidth, cacheShape, 'at least');
  expectSize(launcher, 'keyMask', a.keyMask, B * maskBatchStride, `[B=${B}, maskBatchStride=${maskBatchStride}]`, 'at least');
}

/** Stores the new k, v at `slot` and attends the new queries to slots [0, slot] of each sequence's cache. */
export function decodeAttention(engine: Engine, a: DecodeAttentionArgs): void {
  const { qkv, kCache, vCache, keyMask, out, B, NH, NKV, HS, capacity, slot, maskBatchStride, scale, rope } = a;
  const launcher = 'decodeAttention';
  if (!decodeAttentionSupports(HS)) throw new Error(`${launcher}: HS=${HS} must be a multiple of 4 and at most ${MAX_HS}`);
  if (rope && !decodeAttentionFusesRope(HS)) throw new Error(`${launcher}: RoPE fused here needs HS=${HS} to be a multiple of 8`);
  if (rope) expectSize(launcher, 'positions', rope.positions, B, `[B=${B}]`);
  if (NH % NKV !== 0) throw new Error(`${launcher}: NH=${NH} is not a multiple of NKV=${NKV}`);
  expectDecodeCache(launcher, a);
  const W = (NH + 2 * NKV) * HS;
  expectSize(launcher, 'qkv', qkv, B * W, `[B=${B}, (NH+2·NKV)·HS=${W}]`);
  expectSize(launcher, 'out', out, B * NH * HS, `[B=${B}, NH·HS=${NH * HS}]`);
  const REP = NH / NKV;
  const layout = chooseVariant('decode-attention', decodeAttentionVariants, engine.caps, engine.knobs).value;
  let WG = layout.kind === 'dims' ? (HS <= DIMS_MAX_HS ? 0 : 8) : layout.WG;
  while (WG > 1 && WG * REP * (HS + 2) * 4 > engine.caps.maxComputeWorkgroupStorageSize) WG /= 2;
  // Without RoPE, qkv fills the two rope slots (never read).
  engine.dispatch(specFor(HS, REP, WG, rope !== undefined), {
    bindings: {
      qkv, kCache, vCache, keyMask, out,
      positions: rope?.positions ?? keyMask, invFreq: rope ? inverseFrequencyTable(engine, HS, rope.theta) : qkv,
    },
    uniforms: { NKV, W, capacity, slot, maskBatchStride, scale },
    workgroups: [NKV, B],
  });
}
