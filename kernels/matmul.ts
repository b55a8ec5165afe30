import tiledSource from './matmul.wgsl';
import registerSource from './matmul-register.wgsl';
import naiveSource from './matmul-naive.wgsl';
import commonSource from './matmul-common.wgsl';
import { type Engine, type KernelSpec, Tensor, chooseVariant, shapeString } from '../engine/index.ts';
import type { Variant } from '../engine/variants.ts';

export type MatmulLayout = 'nn' | 'nt' | 'tn';

export interface MatmulArgs {
  /** nn, nt: [M, K]; tn: [K, M]. At least that many elements; only they are read. */
  a: Tensor;
  /** nn, tn: [K, N]; nt: [N, K]. */
  b: Tensor;
  /** [M, N]. */
  out: Tensor;
  M: number;
  N: number;
  K: number;
  /** nn: out[M,N] = A[M,K]·B[K,N]; nt: A[M,K]·B[N,K]ᵀ (linear forward, HF weight [N,K]); tn: A[K,M]ᵀ·B[K,N] (weight gradient). */
  layout: MatmulLayout;
  /** [N], added to every row after the alpha scaling. */
  bias?: Tensor;
  /** out += alpha·A·B (+ bias) instead of out = alpha·A·B (+ bias). */
  accumulate?: boolean;
  alpha?: number;
}

interface MatmulKernel {
  spec: KernelSpec;
  /** Output tile of one workgroup (rows, columns). */
  tile: readonly [number, number];
}

/** `M` lets a variant pick by shape (decode steps multiply only a few rows). */
type KernelChoice = (layout: MatmulLayout, aVec4: boolean, bVec4: boolean, M: number) => MatmulKernel;

const BINDINGS = [
  { name: 'a', access: 'read' },
  { name: 'a4', access: 'read', type: 'vec4<f32>' },
  { name: 'b', access: 'read' },
  { name: 'b4', access: 'read', type: 'vec4<f32>' },
  { name: 'bias', access: 'read' },
  { name: 'out', access: 'read_write' },
] as const;

const UNIFORMS = [
  { name: 'M', type: 'u32' },
  { name: 'N', type: 'u32' },
  { name: 'K', type: 'u32' },
  { name: 'alpha', type: 'f32' },
  { name: 'hasBias', type: 'u32' },
  { name: 'accumulate', type: 'u32' },
] as const;

/** One spec per combination of pipeline constants, made on first use so the engine's pipeline cache holds. */
function specFamily(variant: string, source: string, tile: readonly [number, number]): KernelChoice {
  const kernels = new Map<string, MatmulKernel>();
  return (layout, aVec4, bVec4) => {
    const key = `${layout}${aVec4 ? 4 : 1}${bVec4 ? 4 : 1}`;
    let kernel = kernels.get(key);
    if (!kernel) {
      const spec: KernelSpec = {
        name: `matmul/${variant}-${layout}`,
        source: source + commonSource,
        bindings: BINDINGS,
        uniforms: UNIFORMS,
        constants: {
          A_K_CONTIGUOUS: layout === 'tn' ? 0 : 1,
          B_K_CONTIGUOUS: layout === 'nt' ? 1 : 0,
          A_VEC4: aVec4 ? 1 : 0,
          B_VEC4: bVec4 ? 1 : 0,
        },
      };
      kernel = { spec, tile };
      kernels.set(key, kernel);
    }
    return kernel;
  };
}

/** At or below this many rows the register kernel beats the tiled one for nt on a CPU. */
const SMALL_M = 32;

const tiled = specFamily('tiled', tiledSource, [64, 64]);
const register = specFamily('register', registerSource, [8, 64]);
const naive = specFamily('naive', naiveSource, [16, 16]);

export const matmulVariants: readonly Variant<KernelChoice>[] = [
  // On a CPU the register kernel wins for nn and tn (1.5x over tiled at 1024³ on lavapipe); for nt its B
  // columns are strided loads, 2.5x slower than the tiled kernel's transpose through workgroup memory — except
  // for a few rows (decode steps), where the tiled kernel's 64-row tile is mostly idle and register is 5-10x faster.
  {
    name: 'cpu',
    supported: (caps) => caps.isSoftware,
    value: (layout, aVec4, bVec4, M) => (layout === 'nt' && M > SMALL_M ? tiled : register)(layout, aVec4, bVec4, M),
  },
  { name: 'tiled', supported: () => true, value: tiled },
  { name: 'register', supported: () => true, value: register },
  { name: 'naive', supported: () => true, value: naive },
];

function checkSize(tensor: Tensor, role: string, expected: number, what: string): void {
  if (tensor.size < expected) {
    throw new Error(`matmul: ${role} (tensor ${tensor.name}, shape ${shapeString(tensor.shape)}) has ${tensor.size} elements, ` +
      `needs ${expected} for ${what}`);
  }
}

function overlaps(x: Tensor, y: Tensor): boolean {
  return x.buffer === y.buffer && x.byteOffset < y.byteOffset + y.byteLength && y.byteOffset < x.byteOffset + x.byteLength;
}

/** The same memory seen as whole vec4s: a binding of array<vec4<f32>> drops a trailing partial vec4. Engine
 *  buffers are 16-byte multiples and bindings start 256-byte aligned, so the padding always exists (the
 *  Tensor constructor would throw otherwise). */
function paddedToVec4(tensor: Tensor): Tensor {
  const padded = Math.ceil(tensor.size / 4) * 4;
  return padded === tensor.size ? tensor : new Tensor(tensor.name, tensor.buffer, tensor.byteOffset, [padded], tensor.dtype);
}

/** out = alpha·op(A)·op(B) (+ bias) (+ out): one dispatch. `out` may alias neither input. */
export function matmul(engine: Engine, args: MatmulArgs): void {
  const { a, b, out, M, N, K, layout, bias, accumulate = false, alpha = 1 } = args;
  for (const [name, value] of [['M', M], ['N', N], ['K', K]] as const) {
    if (!Number.isInteger(value) || value < 1) throw new Error(`matmul: ${name}=${value} must be a positive integer`);
  }
  const aShape = layout === 'tn' ? `[K=${K}, M=${M}]` : `[M=${M}, K=${K}]`;
  const bShape = layout === 'nt' ? `[N=${N}, K=${K}]` : `[K=${K}, N=${N}]`;
  checkSize(a, 'a', M * K, `${layout} A ${aShape}`);
  checkSize(b, 'b', K * N, `${layout} B ${bShape}`);
  checkSize(out, 'out', M * N, `out [M=${M}, N=${N}]`);
  if (bias) checkSize(bias, 'bias', N, `bias [N=${N}]`);
  for (const [role, input] of [['a', a], ['b', b], ['bias', bias]] as const) {
    if (input && overlaps(out, input)) {
      throw new Error(`matmul: out (tensor ${out.name}) overlaps ${role} (tensor ${input.name}); inputs are read while out is written`);
    }
  }

  // The contiguous dimension of each operand decides whether its rows split into whole vec4s.
  const aRow = layout === 'tn' ? M : K;
  const bRow = layout === 'nt' ? K : N;
  const choose = chooseVariant('matmul', matmulVariants, engine.caps, engine.knobs).value;
  const { spec, tile: [tileM, tileN] } = choose(layout, aRow % 4 === 0, bRow % 4 === 0, M);
  const workgroups: [number, number] = [Math.ceil(N / tileN), Math.ceil(M / tileM)];
  const max = engine.caps.maxComputeWorkgroupsPerDimension;
  if (workgroups[0] > max || workgroups[1] > max) {
    throw new Error(`matmul: M=${M}, N=${N} need ${workgroups[1]}x${workgroups[0]} tiles of ${tileM}x${tileN}, above ${max} per dimension`);
  }
  engine.dispatch(spec, {
    // Without a bias, `a` fills the binding slot; hasBias = 0 keeps the kernel from reading it.
    bindings: { a, a4: paddedToVec4(a), b, b4: paddedToVec4(b), bias: bias ?? a, out },
    uniforms: { M, N, K, alpha, hasBias: bias ? 1 : 0, accumulate: accumulate ? 1 : 0 },
    workgroups,
  });
}
