import rmsnormSource from './rmsnorm.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups } from '../engine/index.ts';
import { expectSize, shaderSource, specsByWidth, vectorElementType, widestVector } from './rowwise.ts';

// Must match TILE_COLS in rmsnorm.wgsl: dWeight columns (in vectors) per backward workgroup.
const TILE_COLS = 16;

const forwardSpecs = specsByWidth((width): KernelSpec => ({
  name: `rmsnorm/forward-vec${width}`,
  source: shaderSource('rmsnorm', rmsnormSource, 'forward', width),
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
}));

const backwardSpecs = specsByWidth((width): KernelSpec => ({
  name: `rmsnorm/backward-vec${width}`,
  source: shaderSource('rmsnorm', rmsnormSource, 'backward', width),
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
}));

/** out = x * rsqrt(mean(x²) + eps) * weight per row of x (rows, cols); rstd (rows) keeps the scale for the backward. */
export function rmsnormForward(engine: Engine, a: { x: Tensor; weight: Tensor; out: Tensor; rstd: Tensor; rows: number; cols: number; eps: number }): void {
  const { x, weight, out, rstd, rows, cols, eps } = a;
  const shape = `[rows=${rows}, cols=${cols}]`;
  expectSize('rmsnormForward', 'x', x, rows * cols, shape);
  expectSize('rmsnormForward', 'weight', weight, cols, `[cols=${cols}]`);
  expectSize('rmsnormForward', 'out', out, rows * cols, shape);
  expectSize('rmsnormForward', 'rstd', rstd, rows, `[rows=${rows}]`);
  engine.dispatch(forwardSpecs[widestVector(cols)], {
    bindings: { x, weight, out, rstd },
    uniforms: { rows, cols, eps },
    workgroups: foldWorkgroups(rows),
  });
}

/** dx (rows, cols) and dWeight (cols) of rmsnormForward; each is overwritten, or added to when its accumulate flag is set. */
export function rmsnormBackward(engine: Engine, a: {
  x: Tensor; weight: Tensor; rstd: Tensor; dOut: Tensor; dx: Tensor; dWeight: Tensor;
  rows: number; cols: number; accumulateDx: boolean; accumulateDWeight: boolean;
}): void {
  const { x, weight, rstd, dOut, dx, dWeight, rows, cols } = a;
  const shape = `[rows=${rows}, cols=${cols}]`;
  expectSize('rmsnormBackward', 'x', x, rows * cols, shape);
  expectSize('rmsnormBackward', 'weight', weight, cols, `[cols=${cols}]`);
  expectSize('rmsnormBackward', 'rstd', rstd, rows, `[rows=${rows}]`);
  expectSize('rmsnormBackward', 'dOut', dOut, rows * cols, shape);
  expectSize('rmsnormBackward', 'dx', dx, rows * cols, shape);
  expectSize('rmsnormBackward', 'dWeight', dWeight, cols, `[cols=${cols}]`);
  const width = widestVector(cols);
  const tiles = Math.ceil(cols / width / TILE_COLS);
  engine.dispatch(backwardSpecs[width], {
    bindings: { x, weight, rstd, dOut, dx, dWeight },
    uniforms: { rows, cols, accumulateDx: Number(a.accumulateDx), accumulateDWeight: Number(a.accumulateDWeight) },
    workgroups: foldWorkgroups(tiles + rows),
  });
}
