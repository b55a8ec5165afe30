import preludeSource from './attention.wgsl';
import keyTileSource from './attention-key-tile.wgsl';
import dOutSource from './attention-dout.wgsl';
import forwardSource from './attention-forward.wgsl';
import deltaSource from './attention-backward-delta.wgsl';
import dqSource from './attention-backward-dq.wgsl';
import dkdvSource from './attention-backward-dkdv.wgsl';
import dkdvStoreSource from './attention-backward-dkdv-store.wgsl';
import dkdvStoreFusedSource from './attention-backward-dkdv-store-fused.wgsl';
import registerPreludeSource from './attention-register.wgsl';
import registerForwardSource from './attention-register-forward.wgsl';
import registerDqSource from './attention-register-dq.wgsl';
import registerDkdvSource from './attention-register-dkdv.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type UniformSpec,
  foldWorkgroups,
  chooseVariant,
  expectSize,
  shapeString,
} from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';

export interface AttentionDims {
  B: number;
  Tq: number;
  Tk: number;
  NH: number;
  NKV: number;
  HS: number;
  // Element strides/offsets so q, k, v can live inside the fused qkv buffer [B*T, (NH+2*NKV)*HS] or in a KV cache:
  qRowStride: number;
  qColOffset: number; //  q(b,t,h,d) = q[qColOffset + (b*Tq + t)*qRowStride + h*HS + d]
  kRowStride: number;
  kColOffset: number; //  k(b,j,g,d) = k[kColOffset + b*kvBatchStride + j*kRowStride + g*HS + d]
  vRowStride: number;
  vColOffset: number; //  same for v
  /** Elements between batches in k/v: Tk*kRowStride for the fused buffer, capacity*rowStride for a cache. */
  kvBatchStride: number;
  /** Key index of query row 0: 0 for training (Tq == Tk); Tk - Tq for prefill/decode against a cache. */
  queryStart: number;
  /** Usually 1/sqrt(HS). */
  scale: number;
  /** Elements between batches in keyMask; Tk when omitted (a cache's mask may use its capacity). */
  maskBatchStride?: number;
}

export interface AttentionForwardArgs extends AttentionDims {
  q: Tensor;
  k: Tensor;
  v: Tensor; // may be the same fused tensor
  keyMask: Tensor<'u32'>; //           [B, Tk] (see maskBatchStride): 1 = real token, 0 = padding
  out: Tensor; //                      [B*Tq, NH*HS]
  // [B, NH, Tq] natural-log logsumexp of the scaled scores; 0 for a query that sees no key
  lse: Tensor;
}

export interface AttentionBackwardArgs extends AttentionDims {
  q: Tensor;
  k: Tensor;
  v: Tensor;
  keyMask: Tensor<'u32'>;
  out: Tensor;
  lse: Tensor; //   from the forward
  dOut: Tensor; //               [B*Tq, NH*HS]
  dq: Tensor;
  dk: Tensor;
  dv: Tensor; // overwritten at q's, k's and v's strides/offsets (may be one fused dqkv tensor)
  /** Which gradients to compute (both unless given): a windowed backward (models/attention-windows.ts) takes dq of
   *  a query window against all its keys, and dk, dv of a key window query window by query window. */
  passes?: 'dq' | 'dkdv';
  /** dk+dv: add to dk and dv instead of overwriting them. */
  accumulate?: boolean;
}

const MAX_HS = 128;
/** Lanes per workgroup of every pass: rows of the block a workgroup owns. */
const BLOCK = 64;

const ATTENTION_UNIFORMS: readonly UniformSpec[] = [
  { name: 'Tq', type: 'u32' },
  { name: 'Tk', type: 'u32' },
  { name: 'NH', type: 'u32' },
  { name: 'NKV', type: 'u32' },
  { name: 'qRowStride', type: 'u32' },
  { name: 'qColOffset', type: 'u32' },
  { name: 'kRowStride', type: 'u32' },
  { name: 'kColOffset', type: 'u32' },
  { name: 'vRowStride', type: 'u32' },
  { name: 'vColOffset', type: 'u32' },
  { name: 'kvBatchStride', type: 'u32' },
  { name: 'maskBatchStride', type: 'u32' },
  { name: 'queryStart', type: 'u32' },
  { name: 'scale', type: 'f32' },
  /** ceil(HS / 4): the trip count of the rolled and register passes' head-vector loops. */
  { name: 'hs4', type: 'u32' },
  /** Forward only: queries per workgroup and lanes splitting each query's keys (attention-forward.wgsl). */
  { name: 'blockRows', type: 'u32' },
  { name: 'keySplit', type: 'u32' },
  /** dk+dv only: 1 adds the pass's gradients to dk and dv (one query window of several), 0 overwrites them. */
  { name: 'accumulate', type: 'u32' },
];

interface AttentionVariant {
  /** The register passes (attention-register*.wgsl) wherever the operands split into aligned vec4s. */
  register: boolean;
  /** The largest head size whose head-vector loops the tiled passes unroll (see attention.wgsl's headVec4s). */
  unrollUpTo: number;
  /** Whether the tiled passes hold a wide head's row in several lanes (attention.wgsl's L; subgroup shuffles). */
  splitHeads: boolean;
}

/**
 * CPU devices with subgroups of 8 or more (lavapipe: 8): the register passes, 16 rows of the own operand per 8-lane
 * workgroup, the other operand's rows shared by subgroupBroadcast: kernel lab, same process, CPU time per call,
 * forward 4.0x and backward 2.9x the tiled passes at B=8 T=128 NH/NKV=4/2 HS=32 (the tiny training step's), 7.0x
 * and 6.4x at HS = 128. Shapes that do not split into vec4s (HS not a multiple of 4) take the tiled passes with
 * rolled loops (they compile in a third of the time).
 * Other CPU devices (`cpu`): the tiled passes, loops unrolled up to HS = 64 (2.3x faster at HS = 32 on lavapipe
 * than rolled; at HS = 128 rolled runs as fast and compiles in 22 s instead of 986 s). GPUs with subgroups
 * (`split-head`): the tiled passes (FlashAttention-2: key or query tiles in workgroup memory, online softmax, no T×T
 * scores in device memory), every head size unrolled, heads wider than 32 held by 2 or 4 lanes a row so a lane's
 * head vectors fit its registers (lanesPerRow; the passes' headers say why each is fast on a GPU). GPUs without
 * subgroups (`unrolled`): the same with one lane a row. Untimed on a GPU: nobody here has one.
 * WEBGPU_KERNEL_VARIANTS=attention:<name> forces one.
 */
const attentionVariants: readonly Variant<AttentionVariant>[] = [
  {
    name: 'register',
    supported: (caps) => caps.deviceClass === 'cpu' && caps.subgroups && caps.subgroupMinSize >= 8,
    value: { register: true, unrollUpTo: 0, splitHeads: false },
  },
  {
    name: 'cpu',
    supported: (caps) => caps.deviceClass === 'cpu',
    value: { register: false, unrollUpTo: 64, splitHeads: false },
  },
  {
    name: 'split-head',
    supported: (caps) => caps.deviceClass === 'gpu' && caps.subgroups && caps.subgroupMinSize >= MAX_LANES_PER_ROW,
    value: { register: false, unrollUpTo: Infinity, splitHeads: true },
  },
  { name: 'unrolled', supported: () => true, value: { register: false, unrollUpTo: Infinity, splitHeads: false } },
  { name: 'rolled', supported: () => false, value: { register: false, unrollUpTo: 0, splitHeads: false } },
];

/**
 * The most lanes a row of the tiled passes takes, and the vec4s of a head vector above which it takes more than one.
 */
const MAX_LANES_PER_ROW = 4;
const MAX_LANE_VEC4S = 8;

/** Lanes holding one row of the tiled passes (attention.wgsl's L): doubled while a lane would hold more than
 *  MAX_LANE_VEC4S vec4s and the row still splits evenly: 1 up to HS = 32, 2 at 64, 4 at 96 and 128. */
function lanesPerRow(HS: number): number {
  const hs4 = Math.ceil(HS / 4);
  let lanes = 1;
  while (lanes < MAX_LANES_PER_ROW && hs4 % (2 * lanes) === 0 && hs4 / lanes > MAX_LANE_VEC4S) lanes *= 2;
  return lanes;
}

/** attention.wgsl's rowSum over the L lanes of a row: a butterfly, so each lane ends with the same bits. */
function rowSumSource(lanes: number): string {
  if (lanes === 1) return 'fn rowSum(x: f32) -> f32 { return x; }\n';
  const steps = Array.from(
    { length: Math.log2(lanes) },
    (_, i) => `  sum += subgroupShuffleXor(sum, ${2 ** i}u);\n`,
  ).join('');
  return `fn rowSum(x: f32) -> f32 {\n  var sum = x;\n${steps}  return sum;\n}\n`;
}

function variantOf(engine: Engine): AttentionVariant {
  return chooseVariant('attention', attentionVariants, engine.caps, engine.knobs).value;
}

const QKV_BINDINGS = [
  { name: 'q', access: 'read' },
  { name: 'k', access: 'read' },
  { name: 'v', access: 'read' },
  { name: 'keyMask', access: 'read', type: 'u32' },
] as const;

const deltaSpec: KernelSpec = {
  name: 'attention/backward-delta',
  source: deltaSource,
  bindings: [
    { name: 'out', access: 'read' },
    { name: 'dOut', access: 'read' },
    { name: 'lse', access: 'read' },
    { name: 'stats', access: 'read_write', type: 'vec2<f32>' },
  ],
  uniforms: [
    { name: 'rows', type: 'u32' },
    { name: 'Tq', type: 'u32' },
    { name: 'NH', type: 'u32' },
    { name: 'HS', type: 'u32' },
  ],
};

type Pass = 'forward' | 'dq' | 'dkdv' | 'dkdv-fused';

const PASS_SOURCES: Record<Pass, string> = {
  forward: keyTileSource + forwardSource,
  dq: keyTileSource + dOutSource + dqSource,
  dkdv: dOutSource + dkdvStoreSource + dkdvSource,
  'dkdv-fused': dOutSource + dkdvStoreFusedSource + dkdvSource,
};

const STATS_BINDING = { name: 'stats', access: 'read', type: 'vec2<f32>' } as const;

const PASS_OUTPUTS: Record<Pass, KernelSpec['bindings']> = {
  forward: [
    { name: 'out', access: 'read_write' },
    { name: 'lse', access: 'read_write' },
  ],
  dq: [{ name: 'dOut', access: 'read' }, STATS_BINDING, { name: 'dq', access: 'read_write' }],
  dkdv: [
    { name: 'dOut', access: 'read' },
    STATS_BINDING,
    { name: 'dk', access: 'read_write' },
    { name: 'dv', access: 'read_write' },
  ],
  'dkdv-fused': [{ name: 'dOut', access: 'read' }, STATS_BINDING, { name: 'dkv', access: 'read_write' }],
};

// Specs are cached per pass, variant and constant set: the engine caches compiled pipelines by spec identity.
const specCache = new Map<string, KernelSpec>();

function attentionSpec(engine: Engine, pass: Pass, HS: number, constants: Record<string, number>): KernelSpec {
  const variant = variantOf(engine);
  const unrolled = HS <= variant.unrollUpTo;
  const lanes = variant.splitHeads ? lanesPerRow(HS) : 1;
  const key = `${pass}:HS=${HS}:${unrolled}:L=${lanes}:${Object.entries(constants)
    .map(([name, value]) => `${name}=${value}`)
    .join(',')}`;
  let spec = specCache.get(key);
  if (!spec) {
    spec = {
      name: `attention/${pass}${unrolled ? '' : '-rolled'}${lanes > 1 ? `-split${lanes}` : ''}`,
      source:
        `const HS: u32 = ${HS}u;\nconst L: u32 = ${lanes}u;\nfn headVec4s() -> u32 { return ` +
        `${unrolled ? 'D4' : 'params.hs4'}; }\n` +
        rowSumSource(lanes) +
        preludeSource +
        PASS_SOURCES[pass],
      bindings: [...QKV_BINDINGS, ...PASS_OUTPUTS[pass]],
      uniforms: ATTENTION_UNIFORMS,
      constants,
      ...(lanes > 1 ? { features: ['subgroups'] as const } : {}),
    };
    specCache.set(key, spec);
  }
  return spec;
}

/**
 * Rows of the other operand per staged tile: the largest power of two up to 64 whose two vec4 tiles (k and v, or
 * q and dOut) fit the device's workgroup memory next to the small per-row arrays (HS = 128 takes 8 rows within
 * WebGPU's guaranteed 16 KiB, 16 within 32 KiB). At least 8; the forward's split-K merge reuses the tiles for its
 * partial states, so its key split is bounded by the tile (attentionForward).
 */
function tileRows(engine: Engine, HS: number): number {
  const hs4 = Math.ceil(HS / 4);
  const budget = engine.caps.maxComputeWorkgroupStorageSize - 256;
  let tile = 64;
  while (tile > 8 && 2 * tile * hs4 * 16 + tile * 8 > budget) tile /= 2;
  if (2 * tile * hs4 * 16 + tile * 8 > budget) {
    throw new Error(
      `attention: HS=${HS} needs ${2 * tile * hs4 * 16 + tile * 8 + 256} bytes of workgroup memory, ` +
        `this device has ${engine.caps.maxComputeWorkgroupStorageSize}`,
    );
  }
  return tile;
}

function nextPowerOfTwo(n: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, n)));
}

/** `keysBeforeQueries`: dk+dv of a window of keys, whose later queries see past its last key (queryStart + Tq may
 *  exceed Tk); otherwise every query's keys are among the Tk. */
function validate(
  op: string,
  a: AttentionDims & { q: Tensor; k: Tensor; v: Tensor; keyMask: Tensor<'u32'> },
  keysBeforeQueries = false,
): number {
  const { B, Tq, Tk, NH, NKV, HS, queryStart } = a;
  for (const [name, value] of Object.entries({ B, Tq, Tk, NH, NKV, HS, queryStart })) {
    if (!Number.isInteger(value) || value < (name === 'queryStart' ? 0 : 1))
      throw new Error(`${op}: ${name}=${value} is not a valid size`);
  }
  if (NH % NKV !== 0) throw new Error(`${op}: NH=${NH} is not a multiple of NKV=${NKV}`);
  if (HS > MAX_HS) throw new Error(`${op}: HS=${HS} exceeds the supported head size ${MAX_HS}`);
  if (!keysBeforeQueries && queryStart + Tq > Tk)
    throw new Error(`${op}: queryStart ${queryStart} + Tq ${Tq} exceeds Tk ${Tk}`);
  const maskStride = a.maskBatchStride ?? Tk;
  if (maskStride < Tk) throw new Error(`${op}: maskBatchStride ${maskStride} is less than Tk ${Tk}`);
  if (a.keyMask.dtype !== 'u32')
    throw new Error(`${op}: keyMask ${a.keyMask.name} is ${a.keyMask.dtype}, expected u32`);
  expectSize(
    op,
    'q',
    a.q,
    a.qColOffset + (B * Tq - 1) * a.qRowStride + NH * HS,
    `q(b,t,h,d): qColOffset + (B·Tq - 1)·qRowStride + NH·HS = ${a.qColOffset} + (${B}·${Tq} - 1)·${a.qRowStride} + ` +
      `${NH}·${HS}`,
    'at least',
  );
  expectSize(
    op,
    'k',
    a.k,
    a.kColOffset + (B - 1) * a.kvBatchStride + (Tk - 1) * a.kRowStride + NKV * HS,
    `k(b,j,g,d): kColOffset + (B - 1)·kvBatchStride + (Tk - 1)·kRowStride + NKV·HS = ${a.kColOffset} + (${B} - ` +
      `1)·${a.kvBatchStride} + (${Tk} - 1)·${a.kRowStride} + ${NKV}·${HS}`,
    'at least',
  );
  expectSize(
    op,
    'v',
    a.v,
    a.vColOffset + (B - 1) * a.kvBatchStride + (Tk - 1) * a.vRowStride + NKV * HS,
    `v(b,j,g,d): vColOffset + (B - 1)·kvBatchStride + (Tk - 1)·vRowStride + NKV·HS = ${a.vColOffset} + (${B} - ` +
      `1)·${a.kvBatchStride} + (${Tk} - 1)·${a.vRowStride} + ${NKV}·${HS}`,
    'at least',
  );
  expectSize(
    op,
    'keyMask',
    a.keyMask,
    (B - 1) * maskStride + Tk,
    `[B=${B}, Tk=${Tk}] with batch stride ${maskStride}`,
    'at least',
  );
  return maskStride;
}

function rangesOverlap(a: Tensor, b: Tensor): boolean {
  return a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;
}

function uniforms(
  a: AttentionDims,
  maskBatchStride: number,
  blockRows = 0,
  keySplit = 1,
  accumulate = false,
): Record<string, number> {
  return {
    blockRows,
    keySplit,
    accumulate: Number(accumulate),
    Tq: a.Tq,
    Tk: a.Tk,
    NH: a.NH,
    NKV: a.NKV,
    qRowStride: a.qRowStride,
    qColOffset: a.qColOffset,
    kRowStride: a.kRowStride,
    kColOffset: a.kColOffset,
    vRowStride: a.vRowStride,
    vColOffset: a.vColOffset,
    kvBatchStride: a.kvBatchStride,
    maskBatchStride,
    queryStart: a.queryStart,
    scale: a.scale,
    hs4: Math.ceil(a.HS / 4),
  };
}

/** The register dk+dv pass's stores into `dk` and `dv` (binding names): overwritten, or added to under `accumulate`
 *  (select, so an overwrite stores the pass's value bit for bit). */
function registerStores(dk: string, dv: string): string {
  const store = (fn: string, target: string) =>
    `fn ${fn}(at: u32, x: vec4<f32>) { ${target}[at] = select(x, ${target}[at] + x, params.accumulate != 0u); }\n`;
  return store('storeDk', dk) + store('storeDv', dv);
}

/**
 * Own rows (queries, or keys for dk/dv) per workgroup of the register passes: 8 lanes x 2 rows
 * (attention-register.wgsl).
 */
const REGISTER_BLOCK = 16;
const REGISTER_SOURCES: Record<Pass, string> = {
  forward: registerForwardSource,
  dq: registerDqSource,
  dkdv: `${registerStores('dk', 'dv')}${registerDkdvSource}`,
  'dkdv-fused': `${registerStores('dkv', 'dkv')}${registerDkdvSource}`,
};
const VEC4_STATS_BINDINGS = [{ name: 'dOut', access: 'read', type: 'vec4<f32>' }, STATS_BINDING] as const;
const REGISTER_OUTPUTS: Record<Pass, KernelSpec['bindings']> = {
  forward: [
    { name: 'out', access: 'read_write', type: 'vec4<f32>' },
    { name: 'lse', access: 'read_write' },
  ],
  dq: [...VEC4_STATS_BINDINGS, { name: 'dq', access: 'read_write', type: 'vec4<f32>' }],
  dkdv: [
    ...VEC4_STATS_BINDINGS,
    { name: 'dk', access: 'read_write', type: 'vec4<f32>' },
    { name: 'dv', access: 'read_write', type: 'vec4<f32>' },
  ],
  'dkdv-fused': [...VEC4_STATS_BINDINGS, { name: 'dkv', access: 'read_write', type: 'vec4<f32>' }],
};

function registerSpec(pass: Pass): KernelSpec {
  const key = `register-${pass}`;
  let spec = specCache.get(key);
  if (!spec) {
    spec = {
      name: `attention/register-${pass}`,
      source: registerPreludeSource + REGISTER_SOURCES[pass],
      bindings: [
        { name: 'q', access: 'read', type: 'vec4<f32>' },
        { name: 'k', access: 'read', type: 'vec4<f32>' },
        { name: 'v', access: 'read', type: 'vec4<f32>' },
        { name: 'keyMask', access: 'read', type: 'u32' },
        ...REGISTER_OUTPUTS[pass],
      ],
      uniforms: ATTENTION_UNIFORMS,
      features: ['subgroups'],
    };
    specCache.set(key, spec);
  }
  return spec;
}

/** Whether every tensor a pass reads or writes splits into whole, 16-byte aligned vec4s along the head vector. */
function vec4Aligned(a: AttentionDims, tensors: Tensor[]): boolean {
  const elements = [
    a.HS,
    a.qRowStride,
    a.qColOffset,
    a.kRowStride,
    a.kColOffset,
    a.vRowStride,
    a.vColOffset,
    a.kvBatchStride,
  ];
  return elements.every((n) => n % 4 === 0) && tensors.every((t) => t.byteOffset % 16 === 0 && t.size % 4 === 0);
}

/** out = softmax(scale·q·kᵀ, causal and key-masked)·v and its logsumexp, in one dispatch. */
export function attentionForward(engine: Engine, args: AttentionForwardArgs): void {
  const op = 'attentionForward';
  const maskStride = validate(op, args);
  const { B, Tq, NH, HS } = args;
  expectSize(op, 'out', args.out, B * Tq * NH * HS, `[B·Tq=${B}·${Tq}, NH·HS=${NH}·${HS}]`);
  expectSize(op, 'lse', args.lse, B * NH * Tq, `[B=${B}, NH=${NH}, Tq=${Tq}]`);
  if (variantOf(engine).register && vec4Aligned(args, [args.q, args.k, args.v, args.out])) {
    engine.dispatch(registerSpec('forward'), {
      bindings: { q: args.q, k: args.k, v: args.v, keyMask: args.keyMask, out: args.out, lse: args.lse },
      uniforms: uniforms(args, maskStride),
      workgroups: [Math.ceil(Tq / REGISTER_BLOCK), NH, B],
    });
    return;
  }
  const tile = tileRows(engine, HS);
  const blockRows = Math.min(BLOCK, nextPowerOfTwo(Tq));
  // The merge's first level parks blockRows·keySplit/2 partial states in the two tiles (2·tile head vectors) and in
  // mergeMax/mergeSum (32 entries).
  const keySplit = Math.max(1, Math.min(BLOCK / blockRows, tile, (4 * tile) / blockRows));
  const spec = attentionSpec(engine, 'forward', HS, { TILE: tile, BLOCK });
  engine.dispatch(spec, {
    bindings: { q: args.q, k: args.k, v: args.v, keyMask: args.keyMask, out: args.out, lse: args.lse },
    uniforms: uniforms(args, maskStride, blockRows, keySplit),
    workgroups: [Math.ceil(Tq / blockRows), NH, B],
  });
}

// The delta pass's output, kept per engine and grown on demand: backward is recorded, not run, so a per-call
// buffer could not be released until the submit completes.
const statsScratch = new WeakMap<Engine, Tensor>();

function statsBuffer(engine: Engine, size: number): Tensor {
  const current = statsScratch.get(engine);
  if (current && current.size >= 2 * size) return current.view('attention.stats', 0, [2 * size]);
  if (current) engine.destroyTensor(current);
  const fresh = engine.tensor('attention.stats', [2 * size]);
  statsScratch.set(engine, fresh);
  return fresh;
}

/** dq, dk, dv of Σ dOut∘out, in three dispatches (delta, dq, dk+dv); deterministic, no atomics. */
export function attentionBackward(engine: Engine, args: AttentionBackwardArgs): void {
  const op = 'attentionBackward';
  const maskStride = validate(op, args, args.passes === 'dkdv');
  const { B, Tq, Tk, NH, NKV, HS } = args;
  expectSize(op, 'out', args.out, B * Tq * NH * HS, `[B·Tq=${B}·${Tq}, NH·HS=${NH}·${HS}]`);
  expectSize(op, 'dOut', args.dOut, B * Tq * NH * HS, `[B·Tq=${B}·${Tq}, NH·HS=${NH}·${HS}]`);
  expectSize(op, 'lse', args.lse, B * NH * Tq, `[B=${B}, NH=${NH}, Tq=${Tq}]`);
  const dq = args.passes !== 'dkdv';
  const dkdv = args.passes !== 'dq';
  if (dq) expectSize(op, 'dq', args.dq, args.q.size, `q's shape ${shapeString(args.q.shape)}`);
  if (dkdv) {
    expectSize(op, 'dk', args.dk, args.k.size, `k's shape ${shapeString(args.k.shape)}`);
    expectSize(op, 'dv', args.dv, args.v.size, `v's shape ${shapeString(args.v.shape)}`);
  }
  const rows = B * NH * Tq;
  const stats = statsBuffer(engine, rows);
  engine.dispatch(deltaSpec, {
    bindings: { out: args.out, dOut: args.dOut, lse: args.lse, stats },
    uniforms: { rows, Tq, NH, HS },
    workgroups: foldWorkgroups(Math.ceil(rows / 256)),
  });
  const shared = { q: args.q, k: args.k, v: args.v, keyMask: args.keyMask, dOut: args.dOut, stats };
  // WebGPU forbids two writable bindings of overlapping ranges: one fused gradient tensor is bound once.
  const fused =
    args.dk.buffer === args.dv.buffer && args.dk.byteOffset === args.dv.byteOffset && args.dk.size === args.dv.size;
  if (!fused && args.dk.buffer === args.dv.buffer && rangesOverlap(args.dk, args.dv)) {
    throw new Error(
      `${op}: dk ${args.dk.name} and dv ${args.dv.name} overlap without being the same tensor; pass one fused tensor ` +
        `for both`,
    );
  }
  const register =
    variantOf(engine).register && vec4Aligned(args, [args.q, args.k, args.v, args.dOut, args.dq, args.dk, args.dv]);
  const tile = register ? 0 : tileRows(engine, HS);
  const spec = (pass: Pass) => (register ? registerSpec(pass) : attentionSpec(engine, pass, HS, { TILE: tile, BLOCK }));
  const rowsPerWorkgroup = register ? REGISTER_BLOCK : BLOCK;
  if (dq)
    engine.dispatch(spec('dq'), {
      bindings: { ...shared, dq: args.dq },
      uniforms: uniforms(args, maskStride),
      workgroups: [Math.ceil(Tq / rowsPerWorkgroup), NH, B],
    });
  if (dkdv)
    engine.dispatch(spec(fused ? 'dkdv-fused' : 'dkdv'), {
      bindings: fused ? { ...shared, dkv: args.dk } : { ...shared, dk: args.dk, dv: args.dv },
      uniforms: uniforms(args, maskStride, 0, 1, args.accumulate),
      workgroups: [Math.ceil(Tk / rowsPerWorkgroup), NKV, B],
    });
}
