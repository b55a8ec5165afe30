import rmsnormSource from './rmsnorm.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  chooseVariant,
  foldWorkgroups,
  expectSize,
} from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import {
  shaderSource,
  specsByWidth,
  vectorElementType,
  widestVector,
  withColumnGrad,
  withWorkgroupSum,
  type VectorWidth,
} from '../util/rowwise.ts';

// Must match WG in rmsnorm.wgsl and TILE_COLS in ../util/column-grad.wgsl.
const WG = 64;
const TILE_COLS = 16;

interface RmsnormKernels {
  forward: Record<VectorWidth, KernelSpec>;
  backward: Record<VectorWidth, KernelSpec>;
  /** Rows each workgroup of dx (and of the forward) covers. */
  rowsPerWorkgroup: number;
}

function kernels(variant: 'workgroup-per-row' | 'lane-per-row'): RmsnormKernels {
  return {
    forward: specsByWidth((width) => ({
      name: `rmsnorm/forward-${variant}-vec${width}`,
      source: withWorkgroupSum(shaderSource('rmsnorm', rmsnormSource, `forward-${variant}`, width)),
      entryPoint: 'forward',
      bindings: [
        { name: 'x', access: 'read', type: vectorElementType(width) },
        { name: 'weight', access: 'read', type: vectorElementType(width) },
        { name: 'out', access: 'read_write', type: vectorElementType(width) },
        { name: 'rstd', access: 'read_write' },
      ],
      uniforms: [
        { name: 'rows', type: 'u32' },
        { name: 'cols', type: 'u32' },
        { name: 'eps', type: 'f32' },
      ],
    })),
    backward: specsByWidth((width) => ({
      name: `rmsnorm/backward-${variant}-vec${width}`,
      source: withWorkgroupSum(
        withColumnGrad(shaderSource('rmsnorm', rmsnormSource, ['backward', `backward-${variant}`], width)),
      ),
      entryPoint: 'backward',
      bindings: [
        { name: 'x', access: 'read', type: vectorElementType(width) },
        { name: 'weight', access: 'read', type: vectorElementType(width) },
        { name: 'rstd', access: 'read' },
        { name: 'dOut', access: 'read', type: vectorElementType(width) },
        { name: 'dx', access: 'read_write', type: vectorElementType(width) },
        { name: 'dWeight', access: 'read_write', type: vectorElementType(width) },
      ],
      uniforms: [
        { name: 'rows', type: 'u32' },
        { name: 'cols', type: 'u32' },
        { name: 'accumulateDx', type: 'u32' },
        { name: 'accumulateDWeight', type: 'u32' },
      ],
    })),
    rowsPerWorkgroup: variant === 'lane-per-row' ? WG : 1,
  };
}

const variants: Variant<RmsnormKernels>[] = [
  { name: 'lane-per-row', supported: (caps) => caps.deviceClass === 'cpu', value: kernels('lane-per-row') },
  { name: 'workgroup-per-row', supported: () => true, value: kernels('workgroup-per-row') },
];

function chosen(engine: Engine): RmsnormKernels {
  return chooseVariant('rmsnorm', variants, engine.caps, engine.knobs).value;
}

/** out = x * rsqrt(mean(x²) + eps) * weight per row of x (rows, cols); rstd (rows) keeps the scale for the backward. */
export function rmsnormForward(
  engine: Engine,
  a: { x: Tensor; weight: Tensor; out: Tensor; rstd: Tensor; rows: number; cols: number; eps: number },
): void {
  const { x, weight, out, rstd, rows, cols, eps } = a;
  const shape = `[rows=${rows}, cols=${cols}]`;
  expectSize('rmsnormForward', 'x', x, rows * cols, shape);
  expectSize('rmsnormForward', 'weight', weight, cols, `[cols=${cols}]`);
  expectSize('rmsnormForward', 'out', out, rows * cols, shape);
  expectSize('rmsnormForward', 'rstd', rstd, rows, `[rows=${rows}]`);
  const variant = chosen(engine);
  engine.dispatch(variant.forward[widestVector(cols)], {
    bindings: { x, weight, out, rstd },
    uniforms: { rows, cols, eps },
    workgroups: foldWorkgroups(Math.ceil(rows / variant.rowsPerWorkgroup)),
  });
}

/**
 * dx (rows, cols) and dWeight (cols) of rmsnormForward; each is overwritten, or added to when its accumulate flag is
 * set.
 */
export function rmsnormBackward(
  engine: Engine,
  a: {
    x: Tensor;
    weight: Tensor;
    rstd: Tensor;
    dOut: Tensor;
    dx: Tensor;
    dWeight: Tensor;
    rows: number;
    cols: number;
    accumulateDx: boolean;
    accumulateDWeight: boolean;
  },
): void {
  const { x, weight, rstd, dOut, dx, dWeight, rows, cols } = a;
  const shape = `[rows=${rows}, cols=${cols}]`;
  expectSize('rmsnormBackward', 'x', x, rows * cols, shape);
  expectSize('rmsnormBackward', 'weight', weight, cols, `[cols=${cols}]`);
  expectSize('rmsnormBackward', 'rstd', rstd, rows, `[rows=${rows}]`);
  expectSize('rmsnormBackward', 'dOut', dOut, rows * cols, shape);
  expectSize('rmsnormBackward', 'dx', dx, rows * cols, shape);
  expectSize('rmsnormBackward', 'dWeight', dWeight, cols, `[cols=${cols}]`);
  const variant = chosen(engine);
  const width = widestVector(cols);
  const tiles = Math.ceil(cols / width / TILE_COLS);
  engine.dispatch(variant.backward[width], {
    bindings: { x, weight, rstd, dOut, dx, dWeight },
    uniforms: { rows, cols, accumulateDx: Number(a.accumulateDx), accumulateDWeight: Number(a.accumulateDWeight) },
    workgroups: foldWorkgroups(tiles + Math.ceil(rows / variant.rowsPerWorkgroup)),
  });
}
