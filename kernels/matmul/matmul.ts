import tiledSource from './matmul.wgsl';
import gpuSource from './matmul-gpu.wgsl';
import tileLoadsSource from './matmul-tile-loads.wgsl';
import registerSource from './matmul-register.wgsl';
import registerShuffleSource from './matmul-register-shuffle.wgsl';
import naiveSource from './matmul-naive.wgsl';
import commonSource from './matmul-common.wgsl';
import bF32Source from './matmul-b-f32.wgsl';
import bHalfSource from './matmul-b-half.wgsl';
import bF16Source from './matmul-b-f16.wgsl';
import bNf4Source from './matmul-b-nf4.wgsl';
import nf4NestedSource from './matmul-nf4-nested.wgsl';
import bInt8Source from './matmul-b-int8.wgsl';
import {
  type Engine,
  type KernelSpec,
  type BindingSpec,
  type FloatDType,
  type DeviceCapabilities,
  Tensor,
  chooseVariant,
  partRanges,
  expectSize,
  isHalf,
  alignedRows,
  lcm,
} from '../../engine/index.ts';
import type { ElementType } from '../../engine/kernel.ts';
import type { Variant } from '../../engine/variants.ts';
import { unpackPairSource } from '../util/half-weights.ts';
import { NF4_CODE, nf4Sizes } from '../../engine/nf4.ts';
import { int8Sizes } from '../../engine/int8.ts';

export type MatmulLayout = 'nn' | 'nt' | 'tn';

export interface MatmulArgs {
  /** nn, nt: [M, K]; tn: [K, M]. At least that many elements; only they are read. */
  a: Tensor;
  /**
   * nn, tn: [K, N]; nt: [N, K]. f32, or with layouts nt and nn bf16/f16 (frozen weights, unpacked as they are
   * read).
   */
  b: Tensor;
  /** Present when `b` holds a frozen weight's quantized codes (u32 words): their format and scales. Layouts nt
   *  and nn. */
  bQuant?: QuantizedB;
  /** [M, N]. */
  out: Tensor;
  M: number;
  N: number;
  K: number;
  /**
   * nn: out[M,N] = A[M,K]·B[K,N]; nt: A[M,K]·B[N,K]ᵀ (linear forward, HF weight [N,K]); tn: A[K,M]ᵀ·B[K,N] (weight
   * gradient).
   */
  layout: MatmulLayout;
  /** [N], added to every row after the alpha scaling. */
  bias?: Tensor;
  /** out += alpha·A·B (+ bias) instead of out = alpha·A·B (+ bias). */
  accumulate?: boolean;
  alpha?: number;
  /** Decode steps on CPU devices: the op before the matmul folded into its A loads (nt with K % 4 == 0, or nn;
   *  see matmul-register.wgsl). rmsnorm: `a` is the un-normed x [M, K]; swiglu: `a` is gateUp [M, 2K]. */
  prologue?: MatmulPrologue;
  /** Decode steps on CPU devices, nn only: `b` is [K, 2N], gate_up's transposed weight (gate columns, then up
   *  columns), and out [M, N] = silu(A·B[:, :N]) ∘ (A·B[:, N:]), the swiglu of the product. No bias, accumulate or
   *  alpha. */
  epilogue?: 'swiglu';
}

/** A quantized B's statistics. nf4 (engine/nf4.ts): `absmax` float32 per block of 64 [ceil(N·K / 64)], or u32
 *  words of double-quantized ones [nf4Sizes(N·K, true).statistics]. int8 (engine/int8.ts): `scb` float32 per row
 *  of the weight W [out, in] (nt: N rows, nn: K). */
export type QuantizedB = { format: 'nf4'; absmax: Tensor } | { format: 'int8'; scb: Tensor };

export type MatmulPrologue = { kind: 'rmsnorm'; weight: Tensor; eps: number } | { kind: 'swiglu' };

const PROLOGUE_CODES = { rmsnorm: 1, swiglu: 2 } as const;

interface MatmulKernel {
  spec: KernelSpec;
  /** Output tile of one workgroup (rows, columns). */
  tile: readonly [number, number];
}

/** How B is stored and read: float32; bf16 or f16 unpacked from u32 words (core WGSL, any device); f16 read
 *  natively (shader-f16); NF4 codes with float32 block scales, or with double-quantized ones (nf4-nested); or
 *  int8 codes with float32 row scales. */
type BStorage = FloatDType | 'f16-native' | 'nf4' | 'nf4-nested' | 'int8';

/** `M` lets a variant pick by shape (decode steps multiply only a few rows); so does `N` (the gpu variant's tile
 *  size follows the output's), last because only the gpu choice reads it. */
type KernelChoice = (
  layout: MatmulLayout,
  aVec4: boolean,
  bVec4: boolean,
  M: number,
  prologue?: PrologueCode,
  b?: BStorage,
  swigluOut?: boolean,
  N?: number,
) => MatmulKernel;
type PrologueCode = 0 | (typeof PROLOGUE_CODES)[keyof typeof PROLOGUE_CODES];

// b and b4 are the same memory as 1 and 4 floats, 2 and 4 packed halves, or 1 and 4 native halves.
const B_TYPES: Record<BStorage, readonly [ElementType, ElementType]> = {
  f32: ['f32', 'vec4<f32>'],
  bf16: ['u32', 'vec2<u32>'],
  f16: ['u32', 'vec2<u32>'],
  'f16-native': ['f16', 'vec4<f16>'],
  nf4: ['u32', 'u32'],
  'nf4-nested': ['u32', 'u32'],
  int8: ['u32', 'u32'],
};

/** The eighth binding of a quantized B: its statistics. */
const STATISTICS_BINDING: Partial<Record<BStorage, BindingSpec>> = {
  nf4: { name: 'bAbsmax', access: 'read' },
  'nf4-nested': { name: 'bAbsmax', access: 'read', type: 'u32' },
  int8: { name: 'bScale', access: 'read' },
};

function bindings(b: BStorage): BindingSpec[] {
  return [
    { name: 'a', access: 'read' },
    { name: 'a4', access: 'read', type: 'vec4<f32>' },
    { name: 'b', access: 'read', type: B_TYPES[b][0] },
    { name: 'b4', access: 'read', type: B_TYPES[b][1] },
    { name: 'bias', access: 'read' },
    { name: 'out', access: 'read_write' },
    { name: 'prologueWeight', access: 'read', type: 'vec4<f32>' },
    // The eighth storage binding, WebGPU's default limit per stage.
    ...(STATISTICS_BINDING[b] ? [STATISTICS_BINDING[b]] : []),
  ];
}

/** The NF4 codes as a WGSL private array: runtime indexing of a module-scope const array is not portable across
 *  WGSL compilers, and one table (engine/nf4.ts) stays the only copy of the values. */
const NF4_TABLE_SOURCE = `var<private> NF4: array<f32, 16> = array<f32, 16>(${NF4_CODE.map((c) => `${c}f`).join(', ')});\n`;

const NF4_BLOCK_ABSMAX_SOURCE = 'fn blockAbsmax(block: u32) -> f32 { return bAbsmax[block]; }\n';

function bLoads(b: BStorage): string {
  if (b === 'f16-native') return bF16Source;
  if (b === 'nf4') return NF4_TABLE_SOURCE + NF4_BLOCK_ABSMAX_SOURCE + bNf4Source;
  if (b === 'nf4-nested') return NF4_TABLE_SOURCE + nf4NestedSource + bNf4Source;
  if (b === 'int8') return bInt8Source;
  return isHalf(b) ? unpackPairSource(b) + bHalfSource : bF32Source;
}

// An f16 B: read natively (GPUs with shader-f16) or unpacked from words. lavapipe has shader-f16 but converts
// each f16 in software, and native loads were never faster there: 0.93–1.61× the float32 kernel's CPU time at
// Qwen3-0.6B's decode shapes against 0.69–0.95× unpacked in one run, 0.95–1.28× against 0.70–1.41× in another
// (tools/kernel-lab/matmul-half.ts, load average ~15).
export const matmulF16Variants: readonly Variant<boolean>[] = [
  { name: 'native', supported: (caps) => caps.shaderF16 && caps.deviceClass === 'gpu', value: true },
  { name: 'unpacked', supported: () => true, value: false },
];

const UNIFORMS = [
  { name: 'M', type: 'u32' },
  { name: 'N', type: 'u32' },
  { name: 'K', type: 'u32' },
  { name: 'alpha', type: 'f32' },
  { name: 'hasBias', type: 'u32' },
  { name: 'accumulate', type: 'u32' },
  { name: 'eps', type: 'f32' },
  // Where a window of a weight's rows reads and writes (matmul-common.wgsl, matmul-tile-loads.wgsl; weightWindows):
  // A's row stride and first element, out's row stride and the window's first column of out and bias, and the
  // window's first scale of a quantized B (NF4 block, int8 row) with the whole weight's count of them.
  { name: 'aStride', type: 'u32' },
  { name: 'aOffset', type: 'u32' },
  { name: 'outStride', type: 'u32' },
  { name: 'nOffset', type: 'u32' },
  { name: 'bFirstScale', type: 'u32' },
  { name: 'bScales', type: 'u32' },
] as const;

/** One spec per combination of pipeline constants, made on first use so the engine's pipeline cache holds.
 *  `tallRows`: the register kernel's taller tile (its ROWS constant) for the shapes that take it; `constants`:
 *  the variant's own pipeline constants (the gpu kernel's LANE_SIDE). */
function specFamily(
  variant: string,
  source: string,
  tile: readonly [number, number],
  tallRows?: TallRows,
  options: { shuffle?: boolean; constants?: Record<string, number> } = {},
) {
  const kernels = new Map<string, MatmulKernel>();
  return (
    layout: MatmulLayout,
    aVec4: boolean,
    bVec4: boolean,
    M = 0,
    prologue: PrologueCode = 0,
    b: BStorage = 'f32',
    swigluOut = false,
  ): MatmulKernel => {
    const rows = tallRows?.(M, prologue, b, swigluOut) ?? null;
    const key = `${layout}${aVec4 ? 4 : 1}${bVec4 ? 4 : 1}p${prologue}${b}${swigluOut ? 's' : ''}${rows ? `r${rows}` : ''}`;
    let kernel = kernels.get(key);
    if (!kernel) {
      const spec: KernelSpec = {
        name: `matmul/${variant}-${layout}${prologue ? `-${Object.keys(PROLOGUE_CODES)[prologue - 1]}` : ''}${swigluOut ? '-to-swiglu' : ''}${b === 'f32' ? '' : `-${b}`}${rows ? `-rows${rows}` : ''}`,
        source: source + commonSource + bLoads(b),
        bindings: bindings(b),
        ...(b === 'f16-native'
          ? { features: ['shader-f16'] as const }
          : options.shuffle
            ? { features: ['subgroups'] as const }
            : {}),
        uniforms: UNIFORMS,
        constants: {
          A_K_CONTIGUOUS: layout === 'tn' ? 0 : 1,
          B_K_CONTIGUOUS: layout === 'nt' ? 1 : 0,
          A_VEC4: aVec4 ? 1 : 0,
          B_VEC4: bVec4 ? 1 : 0,
          // Only the register kernel declares them.
          ...(prologue ? { A_PROLOGUE: prologue } : {}),
          ...(swigluOut ? { OUT_SWIGLU: 1 } : {}),
          ...(rows ? { ROWS: rows } : {}),
          ...(options.shuffle && rows && layout !== 'nt' ? { A_SHUFFLE: 1 } : {}),
          ...options.constants,
        },
      };
      kernel = { spec, tile: rows ? [rows, tile[1]] : tile };
      kernels.set(key, kernel);
    }
    return kernel;
  };
}

/** At or below this many rows the register kernel beats the tiled one for nt on a CPU. */
const SMALL_M = 32;

const tiled = specFamily('tiled', tiledSource + tileLoadsSource, [64, 64]);
/** From this many rows on, the register kernel's plain float32 products (the training step's nn and tn) take its
 *  12-row tile: 10-15% less CPU time than 8 rows at the tiny model's training shapes. Decode steps (a few rows,
 *  prologues, epilogues) and half-precision B keep 8 rows and their pipelines. */
const TALL_M = 48;
type TallRows = (M: number, prologue: PrologueCode, b: BStorage, swigluOut: boolean) => number | null;
const tallRows: TallRows = (M, prologue, b, swigluOut) =>
  M >= TALL_M && !prologue && !swigluOut && b === 'f32' ? 12 : null;
// WGSL checks every function of a module: the register kernel without matmul-register-shuffle.wgsl still needs a
// definition of the function its A_SHUFFLE branch (false in these pipelines) calls.
const NO_SHUFFLE = '\nfn accumulateShuffledRows(lane: u32, n: u32, K: u32, kStride: u32) {}\n';
const register = specFamily('register', registerSource + NO_SHUFFLE, [8, 64], tallRows);
const registerShuffled = specFamily('register-shuffle', registerSource + registerShuffleSource, [8, 64], tallRows, {
  shuffle: true,
});
/** The register kernel, its tall nn and tn products with A handed round by subgroupShuffle (matmul-register's
 *  A_SHUFFLE; devices with subgroups of at least 8 lanes). Other shapes take the same pipelines as `register`. */
const registerWithShuffle: KernelChoice = (layout, aVec4, bVec4, M, prologue = 0, b = 'f32', swigluOut = false) =>
  (layout !== 'nt' && tallRows(M, prologue, b, swigluOut) ? registerShuffled : register)(
    layout,
    aVec4,
    bVec4,
    M,
    prologue,
    b,
    swigluOut,
  );
const subgroupsOf8 = (caps: DeviceCapabilities) => caps.subgroups && caps.subgroupMinSize >= 8;
const naive = specFamily('naive', naiveSource, [16, 16]);

const gpuWide = specFamily('gpu-wide', gpuSource + tileLoadsSource, [128, 128], undefined, {
  constants: { LANE_SIDE: 8 },
});
const gpuNarrow = specFamily('gpu-narrow', gpuSource + tileLoadsSource, [64, 64], undefined, {
  constants: { LANE_SIDE: 4 },
});
/** Wide tiles (8x8 outputs per invocation, twice narrow's FMAs per workgroup load) once the output has this many
 *  of them: one wave of two workgroups per SM on a ~64-SM card; below it narrow tiles give 4x the workgroups, so
 *  a small output still spreads over the card. A guess until timed on a GPU (tools/bench.js kernels). */
const GPU_WIDE_MIN_TILES = 128;
/** matmul-gpu.wgsl's tiles for an M x N output: wide only where M and N fill them (a decode step's 151,936 logits
 *  of one row make many wide tiles, each 127/128 empty). */
export function gpuMatmulTiles(M: number, N: number): 'wide' | 'narrow' {
  return M >= 128 && N >= 128 && Math.ceil(M / 128) * Math.ceil(N / 128) >= GPU_WIDE_MIN_TILES ? 'wide' : 'narrow';
}
const gpu: KernelChoice = (layout, aVec4, bVec4, M, prologue, b, _swigluOut, N = 1) =>
  (gpuMatmulTiles(M, N) === 'wide' ? gpuWide : gpuNarrow)(layout, aVec4, bVec4, M, prologue, b);

export const matmulVariants: readonly Variant<KernelChoice>[] = [
  // On a CPU the register kernel wins for nn and tn (1.5x over tiled at 1024³ on lavapipe); for nt its B
  // columns are strided loads, 2.5x slower than the tiled kernel's transpose through workgroup memory — except
  // for a few rows (decode steps), where the tiled kernel's 64-row tile is mostly idle and register is 5-10x faster.
  {
    name: 'cpu-subgroups',
    supported: (caps) => caps.deviceClass === 'cpu' && subgroupsOf8(caps),
    value: (layout, aVec4, bVec4, M, prologue, b) =>
      (layout === 'nt' && M > SMALL_M ? tiled : registerWithShuffle)(layout, aVec4, bVec4, M, prologue, b),
  },
  {
    name: 'cpu',
    supported: (caps) => caps.deviceClass === 'cpu',
    value: (layout, aVec4, bVec4, M, prologue, b) =>
      (layout === 'nt' && M > SMALL_M ? tiled : register)(layout, aVec4, bVec4, M, prologue, b),
  },
  // Every other device is taken for a GPU: workgroup-tiled with register blocks (matmul-gpu.wgsl's header says
  // why it should be fast there).
  { name: 'gpu', supported: (caps) => caps.deviceClass === 'gpu', value: gpu },
  { name: 'tiled', supported: () => true, value: tiled },
  { name: 'register', supported: () => true, value: register },
  { name: 'register-shuffle', supported: subgroupsOf8, value: registerWithShuffle },
  // gpu's two tile sizes on their own, whatever the shape (tests and the lab).
  { name: 'gpu-wide', supported: () => true, value: gpuWide },
  { name: 'gpu-narrow', supported: () => true, value: gpuNarrow },
  { name: 'naive', supported: () => true, value: naive },
];

function overlaps(x: Tensor, y: Tensor): boolean {
  return (
    x.buffer === y.buffer && x.byteOffset < y.byteOffset + y.byteLength && y.byteOffset < x.byteOffset + x.byteLength
  );
}

/** The same memory seen as whole 16-byte vectors (4 floats, 8 halves): a binding of array<vec4<…>> drops a
 *  trailing partial vector. Engine buffers are 16-byte multiples and bindings start 256-byte aligned, so the
 *  padding always exists (the Tensor constructor would throw otherwise). */
function paddedToVec4(tensor: Tensor): Tensor {
  const perVector = 16 / (isHalf(tensor.dtype) ? 2 : 4);
  const padded = Math.ceil(tensor.size / perVector) * perVector;
  return padded === tensor.size
    ? tensor
    : new Tensor(tensor.name, tensor.buffer, tensor.byteOffset, [padded], tensor.dtype);
}

/** Whether matmul can take a prologue for these operands: the register kernel's nt vec4 path or its nn path. */
export function matmulPrologueSupported(layout: MatmulLayout, K: number): boolean {
  return (layout === 'nt' && K % 4 === 0) || layout === 'nn';
}

// Whether decode steps fold rmsnorm and swiglu into their projections. On a CPU a dispatch costs more than the
// register kernel's few extra loads; a GPU runs the separate kernels and its own matmul variant.
export const matmulPrologueVariants: readonly Variant<boolean>[] = [
  { name: 'fused', supported: (caps) => caps.deviceClass === 'cpu', value: true },
  { name: 'separate', supported: () => true, value: false },
];

/** Whether this device's decode steps should pass `prologue` to a matmul over K in this layout. */
export function useMatmulPrologue(engine: Engine, layout: MatmulLayout, K: number): boolean {
  return (
    matmulPrologueSupported(layout, K) &&
    chooseVariant('matmul-prologue', matmulPrologueVariants, engine.caps, engine.knobs).value
  );
}

/** out = alpha·op(A)·op(B) (+ bias) (+ out): one dispatch. `out` may alias neither input. */
export function matmul(engine: Engine, args: MatmulArgs): void {
  const { a, b, bQuant, out, M, N, K, layout, bias, accumulate = false, alpha = 1, prologue, epilogue } = args;
  for (const [name, value] of [
    ['M', M],
    ['N', N],
    ['K', K],
  ] as const) {
    if (!Number.isInteger(value) || value < 1) throw new Error(`matmul: ${name}=${value} must be a positive integer`);
  }
  const aShape = layout === 'tn' ? `[K=${K}, M=${M}]` : `[M=${M}, K=${K}]`;
  const bShape = layout === 'nt' ? `[N=${N}, K=${K}]` : `[K=${K}, N=${N}]`;
  if (prologue && !matmulPrologueSupported(layout, K)) {
    throw new Error(
      `matmul: a ${prologue.kind} prologue needs layout nt with K % 4 == 0, or nn; got ${layout} with K=${K}`,
    );
  }
  if (prologue?.kind === 'rmsnorm')
    expectSize('matmul', 'prologue weight', prologue.weight, K, `rmsnorm weight [K=${K}]`, 'at least');
  expectSize(
    'matmul',
    'a',
    a,
    prologue?.kind === 'swiglu' ? 2 * M * K : M * K,
    prologue?.kind === 'swiglu' ? `swiglu gateUp [M=${M}, 2K=${2 * K}]` : `${layout} A ${aShape}`,
    'at least',
  );
  if (epilogue && (layout !== 'nn' || bias || accumulate || alpha !== 1)) {
    throw new Error(
      `matmul: a ${epilogue} epilogue needs layout nn and no bias, accumulate or alpha; got ` +
        `${layout}${bias ? ' with a bias' : ''}${accumulate ? ' accumulating' : ''}${alpha !== 1 ? ` with alpha ${alpha}` : ''}`,
    );
  }
  if (epilogue)
    expectSize('matmul', 'b', b, 2 * K * N, `nn B [K=${K}, 2N=${2 * N}] (gate then up columns)`, 'at least');
  else if (bQuant?.format === 'nf4') {
    const nested = bQuant.absmax.dtype === 'u32';
    const { words, statistics } = nf4Sizes(K * N, nested);
    expectSize('matmul', 'b', b, words, `NF4 codes of ${layout} B ${bShape} (8 per word)`, 'at least');
    expectSize(
      'matmul',
      'bQuant.absmax',
      bQuant.absmax,
      statistics,
      `${nested ? 'double-quantized ' : ''}block scales of ${layout} B ${bShape}`,
      'at least',
    );
  } else if (bQuant?.format === 'int8') {
    expectSize('matmul', 'b', b, int8Sizes(K, N).words, `int8 codes of ${layout} B ${bShape} (4 per word)`, 'at least');
    const rows = layout === 'nt' ? N : K;
    expectSize('matmul', 'bQuant.scb', bQuant.scb, rows, `row scales of the weight (${rows} rows)`, 'at least');
  } else expectSize('matmul', 'b', b, K * N, `${layout} B ${bShape}`, 'at least');
  for (const [role, input] of [
    ['a', a],
    ['out', out],
    ['bias', bias],
  ] as const) {
    if (input && input.dtype !== 'f32')
      throw new Error(`matmul: ${role} (tensor ${input.name}) is ${input.dtype}; only b may be half precision`);
  }
  const scales = bQuant ? (bQuant.format === 'nf4' ? bQuant.absmax : bQuant.scb) : undefined;
  if (bQuant && scales) {
    const name = bQuant.format === 'nf4' ? 'NF4' : 'int8';
    if (b.dtype !== 'u32' || (scales.dtype !== 'f32' && !(bQuant.format === 'nf4' && scales.dtype === 'u32')))
      throw new Error(
        `matmul: an ${name} b needs u32 codes and ${bQuant.format === 'nf4' ? 'f32 (or double-quantized u32) block' : 'f32 row'} ` +
          `scales; b (tensor ${b.name}) is ${b.dtype}, its scales (tensor ${scales.name}) ${scales.dtype}`,
      );
    if (layout === 'tn' || prologue || epilogue)
      throw new Error(
        `matmul: an ${name} b (tensor ${b.name}, a frozen LoRA base) is read in layouts nt and nn without prologue or ` +
          `epilogue; got ${layout}${prologue ? ` with a ${prologue.kind} prologue` : ''}${epilogue ? ` with a ${epilogue} epilogue` : ''}`,
      );
  }
  const bDtype = (bQuant ? 'f32' : b.dtype) as FloatDType;
  if (bDtype !== 'f32' && !isHalf(bDtype))
    throw new Error(`matmul: b (tensor ${b.name}) is ${b.dtype}, expected f32, bf16 or f16 (or u32 with bQuant)`);
  // Only decode steps fold ops into a matmul, and only the trained actor decodes: its weights are float32.
  // A half B would compile two more register pipelines that nothing runs.
  if ((prologue || epilogue) && bDtype !== 'f32') {
    throw new Error(
      `matmul: a ${prologue ? `${prologue.kind} prologue` : `${epilogue} epilogue`} needs a float32 b (decode steps ` +
        `of the trained actor); b (tensor ${b.name}) is ${b.dtype}`,
    );
  }
  // Half weights are frozen: read by forwards (nt: x·Wᵀ) and by the backward's dX = dY·W (nn: W [N, K] is B
  // [K, N] in its own row-major order) of a LoRA base, but never the weight gradient (tn) a trained weight needs.
  if (isHalf(bDtype) && layout === 'tn') {
    throw new Error(
      `matmul: a ${bDtype} b (tensor ${b.name}, frozen weights) is read in layouts nt and nn only (x·Wᵀ, dY·W); ` +
        `got tn`,
    );
  }
  const bStorage: BStorage = bQuant
    ? bQuant.format === 'int8'
      ? 'int8'
      : bQuant.absmax.dtype === 'u32'
        ? 'nf4-nested'
        : 'nf4'
    : bDtype === 'f16' && chooseVariant('matmul-f16', matmulF16Variants, engine.caps, engine.knobs).value
      ? 'f16-native'
      : bDtype;
  expectSize('matmul', 'out', out, M * N, `[M=${M}, N=${N}]`, 'at least');
  if (bias) expectSize('matmul', 'bias', bias, N, `[N=${N}]`, 'at least');
  const prologueWeight = prologue?.kind === 'rmsnorm' ? prologue.weight : undefined;
  for (const [role, input] of [
    ['a', a],
    ['b', b],
    ['b scales', scales],
    ['bias', bias],
    ['prologue weight', prologueWeight],
  ] as const) {
    if (input && overlaps(out, input)) {
      throw new Error(
        `matmul: out (tensor ${out.name}) overlaps ${role} (tensor ${input.name}); inputs are read while out is ` +
          `written`,
      );
    }
  }

  const resolved: ResolvedMatmul = { layout, bStorage, bDtype, prologue, epilogue, scales, prologueWeight };
  // Unsplit: A's rows are K apart (gateUp's 2K under a swiglu prologue), tn's M; out's N.
  const whole: MatmulWindow = {
    a,
    b,
    out,
    bias,
    M,
    N,
    K,
    accumulate,
    alpha,
    aStride: layout === 'tn' ? M : prologue?.kind === 'swiglu' ? 2 * K : K,
    aOffset: 0,
    outStride: N,
    nOffset: 0,
    bFirstScale: 0,
    bScales: bStorage === 'nf4' || bStorage === 'nf4-nested' ? Math.ceil((N * K) / 64) : 0,
  };
  for (const window of weightWindows(engine, resolved, whole)) recordMatmul(engine, resolved, window);
}

/** What one matmul call fixed for all its windows. */
interface ResolvedMatmul {
  layout: MatmulLayout;
  bStorage: BStorage;
  bDtype: FloatDType;
  prologue?: MatmulPrologue;
  epilogue?: 'swiglu';
  scales?: Tensor;
  prologueWeight?: Tensor;
}

/** One dispatch's operands, shape and placement (the uniforms weightWindows sets). */
interface MatmulWindow {
  a: Tensor;
  b: Tensor;
  out: Tensor;
  bias?: Tensor;
  M: number;
  N: number;
  K: number;
  accumulate: boolean;
  alpha: number;
  aStride: number;
  aOffset: number;
  outStride: number;
  nOffset: number;
  bFirstScale: number;
  bScales: number;
}

/** Elements of B per u32 word. */
function bElementsPerWord(b: BStorage): number {
  return b === 'int8' ? 4 : b === 'nf4' || b === 'nf4-nested' ? 8 : b === 'f32' ? 1 : 2;
}

/**
 * The call as dispatches whose bindings each fit one binding (engine.maxBindingBytes) and lie in one buffer. A
 * layer weight above that (Qwen3-8B's bf16 gate_up_proj is 192 MiB, WebGPU's default binding 128 MiB) is taken in
 * windows of its rows, W [out, in] being B in both layouts that read it:
 *   nt (y = x·Wᵀ): rows [n0, n0 + w) of W make columns [n0, n0 + w) of y: out and bias bound whole at column
 *     nOffset = n0, rows outStride = N apart. Each output is the unsplit sum: bit-identical.
 *   nn (dx = dy·W): rows [k0, k0 + w) of W are a window of the reduction: A read from column aOffset = k0, rows
 *     aStride = K apart, every window after the first accumulating into out (the bias added once). A sum in
 *     pieces: within float rounding of the unsplit one.
 *   tn (dW = dyᵀ·x): a gradient above one binding is taken in windows of its rows [m0, m0 + w), contiguous, A
 *     read from column m0 (rows M apart). Bit-identical.
 * A quantized B's windows start at a whole NF4 block (int8: row) and index its whole statistics from bFirstScale.
 * A prologue or epilogue in nn (the CPU decode path's transposed copies, which are made only for weights that fit
 * a binding) would see part of the reduction: an error.
 */
function weightWindows(engine: Engine, r: ResolvedMatmul, whole: MatmulWindow): MatmulWindow[] {
  const { layout, bStorage } = r;
  const { b, out, M, N, K } = whole;
  const fits = (t: Tensor) => t.parts.length === 1 && paddedToVec4(t).byteLength <= engine.maxBindingBytes;
  if (layout === 'tn') {
    if (fits(out)) return [whole];
    return rowSteps(engine, leading(out, M * N), M, N, 'f32').map(({ first, rows }) => ({
      ...whole,
      out: out.view(`${out.name}[${first}:${first + rows}]`, first * N, [rows, N]),
      M: rows,
      aOffset: first,
    }));
  }
  if (fits(b)) return [whole];
  if (layout === 'nn' && (r.prologue || r.epilogue))
    throw new Error(
      `matmul: b (tensor ${b.name}, ${b.byteLength} bytes) is above one binding (${engine.maxBindingBytes} bytes) ` +
        `and is taken in windows of its rows, which split an nn product's reduction: a ` +
        `${r.prologue ? `${r.prologue.kind} prologue` : `${r.epilogue} epilogue`} cannot run over them`,
    );
  // W's rows and row length: B [N, K] in nt, [K, N] in nn.
  const [rows, rowLength] = layout === 'nt' ? [N, K] : [K, N];
  const perWord = bElementsPerWord(bStorage);
  const quantized = bStorage === 'int8' || bStorage.startsWith('nf4');
  return rowSteps(engine, b, rows, rowLength, bStorage).map(({ first, rows: w }, i) => {
    const firstElement = first * rowLength;
    const bWindow = quantized
      ? b.view(`${b.name}[rows ${first}:${first + w}]`, firstElement / perWord, [Math.ceil((w * rowLength) / perWord)])
      : b.view(`${b.name}[${first}:${first + w}]`, firstElement, [w, rowLength]);
    const placement = quantized ? { bFirstScale: bStorage === 'int8' ? first : firstElement / 64 } : {};
    return layout === 'nt'
      ? { ...whole, ...placement, b: bWindow, N: w, outStride: N, nOffset: first }
      : {
          ...whole,
          ...placement,
          b: bWindow,
          K: w,
          aOffset: first,
          accumulate: whole.accumulate || i > 0,
          bias: i === 0 ? whole.bias : undefined,
        };
  });
}

/** The first `size` elements of `t` (an operand may be larger than the product reads). */
function leading(t: Tensor, size: number): Tensor {
  return t.size === size ? t : t.view(t.name, 0, [size]);
}

/** Rows per window of a weight whose rows hold `rowLength` elements, `elementsPerWord` a 4-byte word (1 float32, 2
 *  halves, 4 int8 codes, 8 NF4 codes): windows of at most `maxBytes` whose starts, at multiples of it, are
 *  `alignBytes`-aligned (NF4: then also a whole block of 64, alignBytes being at least 32), a multiple of 4 rows
 *  where the limit allows (vec4 loads of A at the window's first column). 0: not even the aligned minimum fits. */
export function weightRowStep(
  rowLength: number,
  elementsPerWord: number,
  maxBytes: number,
  alignBytes: number,
): number {
  const rowBytes = (rowLength * 4) / elementsPerWord;
  // Elements a window's first element must be a multiple of.
  const quantum = (alignBytes * elementsPerWord) / 4;
  const alignRows = alignedRows(rowLength, quantum);
  const most = Math.floor(maxBytes / rowBytes);
  const rows4 = lcm(alignRows, 4);
  return most >= rows4 ? Math.floor(most / rows4) * rows4 : Math.floor(most / alignRows) * alignRows;
}

/** Windows [first, first + rows) of the `rows` rows (of `rowLength` elements stored as `storage`) of `t`, of
 *  weightRowStep rows each, restarting at each of t's parts. */
function rowSteps(
  engine: Engine,
  t: Tensor,
  rows: number,
  rowLength: number,
  storage: BStorage,
): { first: number; rows: number }[] {
  const perWord = bElementsPerWord(storage);
  const step = weightRowStep(rowLength, perWord, engine.maxBindingBytes, engine.caps.minStorageBufferOffsetAlignment);
  if (step < 1)
    throw new Error(
      `matmul: ${t.name} cannot be taken in windows of its rows: rows of ${rowLength} elements ` +
        `(${(rowLength * 4) / perWord} bytes) do not fit one binding of ${engine.maxBindingBytes} bytes in aligned ` +
        'windows',
    );
  const windows: { first: number; rows: number }[] = [];
  // Part boundaries in rows (t's elements are words of codes when B is quantized).
  const perElement = storage === 'int8' || storage.startsWith('nf4') ? perWord : 1;
  const starts = t.parts.length === 1 ? [0] : partRanges(t).map((part) => (part.first * perElement) / rowLength);
  starts.forEach((start, p) => {
    if (!Number.isInteger(start))
      throw new Error(`matmul: ${t.name} lies in buffers cut inside a row of ${rowLength} elements`);
    const end = p + 1 < starts.length ? starts[p + 1] : rows;
    for (let first = start; first < end; first += step) windows.push({ first, rows: Math.min(step, end - first) });
  });
  return windows;
}

function recordMatmul(engine: Engine, r: ResolvedMatmul, w: MatmulWindow): void {
  const { layout, bStorage, bDtype, prologue, epilogue, scales, prologueWeight } = r;
  const { a, b, out, bias, M, N, K } = w;
  // The contiguous dimension of each operand decides whether its rows split into whole vec4s; A's must also start
  // at a whole vec4 of every row it reads (a window of its columns).
  const aRow = layout === 'tn' ? M : K;
  const aVec4 = aRow % 4 === 0 && w.aStride % 4 === 0 && w.aOffset % 4 === 0;
  const bRow = layout === 'nt' ? K : N;
  // Prologues and the epilogue exist in the register kernel only, whatever the variant choice.
  const {
    spec,
    tile: [tileM, tileN],
  } =
    prologue || epilogue
      ? register(
          layout,
          aVec4,
          bRow % 4 === 0,
          M,
          prologue ? PROLOGUE_CODES[prologue.kind] : 0,
          bStorage,
          epilogue === 'swiglu',
        )
      : chooseVariant('matmul', matmulVariants, engine.caps, engine.knobs).value(
          layout,
          aVec4,
          bRow % 4 === 0,
          M,
          0,
          bStorage,
          false,
          N,
        );
  const workgroups: [number, number] = [Math.ceil(N / tileN), Math.ceil(M / tileM)];
  const max = engine.caps.maxComputeWorkgroupsPerDimension;
  if (workgroups[0] > max || workgroups[1] > max) {
    throw new Error(
      `matmul: M=${M}, N=${N} need ${workgroups[1]}x${workgroups[0]} tiles of ${tileM}x${tileN}, above ${max} per ` +
        `dimension`,
    );
  }
  engine.dispatch(spec, {
    // Without a bias, `a` fills the binding slot; hasBias = 0 keeps the kernel from reading it.
    // A half b binds whole words too: padded like b4.
    bindings: {
      a,
      a4: paddedToVec4(a),
      b: isHalf(bDtype) ? paddedToVec4(b) : b,
      b4: paddedToVec4(b),
      bias: bias ?? a,
      out,
      prologueWeight: paddedToVec4(prologueWeight ?? a),
      ...(bStorage === 'nf4' || bStorage === 'nf4-nested' ? { bAbsmax: scales! } : {}),
      ...(bStorage === 'int8' ? { bScale: scales! } : {}),
    },
    uniforms: {
      M,
      N,
      K,
      alpha: w.alpha,
      hasBias: bias ? 1 : 0,
      accumulate: w.accumulate ? 1 : 0,
      eps: prologue?.kind === 'rmsnorm' ? prologue.eps : 0,
      aStride: w.aStride,
      aOffset: w.aOffset,
      outStride: w.outStride,
      nOffset: w.nOffset,
      bFirstScale: w.bFirstScale,
      bScales: w.bScales,
    },
    workgroups,
  });
}
