import headRmsnormSource from './head-rmsnorm.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups, expectSize } from '../../engine/index.ts';
import { shaderSource, specsByWidth, vectorElementType, widestVector } from '../util/rowwise.ts';

// Must match WG and TILE_COLS in head-rmsnorm.wgsl.
const WG = 64;
const TILE_COLS = 8;

const shapeUniforms = [
  { name: 'rows', type: 'u32' },
  { name: 'NH', type: 'u32' },
  { name: 'NKV', type: 'u32' },
  { name: 'HS', type: 'u32' },
] as const;

const forwardSpecs = specsByWidth(
  (width): KernelSpec => ({
    name: `head-rmsnorm/forward-vec${width}`,
    source: shaderSource('head-rmsnorm', headRmsnormSource, 'forward', width),
    entryPoint: 'forward',
    bindings: [
      { name: 'qkv', access: 'read', type: vectorElementType(width) },
      { name: 'qWeight', access: 'read', type: vectorElementType(width) },
      { name: 'kWeight', access: 'read', type: vectorElementType(width) },
      { name: 'out', access: 'read_write', type: vectorElementType(width) },
      { name: 'rstd', access: 'read_write' },
    ],
    uniforms: [...shapeUniforms, { name: 'eps', type: 'f32' }],
  }),
);

const backwardSpecs = specsByWidth(
  (width): KernelSpec => ({
    name: `head-rmsnorm/backward-vec${width}`,
    source: shaderSource('head-rmsnorm', headRmsnormSource, 'backward', width),
    entryPoint: 'backward',
    bindings: [
      { name: 'qkv', access: 'read', type: vectorElementType(width) },
      { name: 'qWeight', access: 'read', type: vectorElementType(width) },
      { name: 'kWeight', access: 'read', type: vectorElementType(width) },
      { name: 'rstd', access: 'read' },
      { name: 'dOut', access: 'read', type: vectorElementType(width) },
      { name: 'dQkv', access: 'read_write', type: vectorElementType(width) },
      { name: 'dQWeight', access: 'read_write', type: vectorElementType(width) },
      { name: 'dKWeight', access: 'read_write', type: vectorElementType(width) },
    ],
    uniforms: shapeUniforms,
  }),
);

interface HeadShape {
  rows: number;
  NH: number;
  NKV: number;
  HS: number;
}

function checkShape(launcher: string, tensors: Record<string, Tensor>, { rows, NH, NKV, HS }: HeadShape): void {
  const qkvShape = `[rows=${rows}, (NH + 2*NKV)*HS = (${NH} + 2*${NKV})*${HS}]`;
  const qkvSize: [number, string] = [rows * (NH + 2 * NKV) * HS, qkvShape];
  const weightSize: [number, string] = [HS, `[HS=${HS}]`];
  const expected: Record<string, [number, string]> = {
    qkv: qkvSize,
    out: qkvSize,
    dOut: qkvSize,
    dQkv: qkvSize,
    qWeight: weightSize,
    kWeight: weightSize,
    dQWeight: weightSize,
    dKWeight: weightSize,
    rstd: [rows * (NH + NKV), `[rows=${rows}, NH + NKV=${NH + NKV}]`],
  };
  for (const [what, tensor] of Object.entries(tensors)) expectSize(launcher, what, tensor, ...expected[what]);
}

/** Qwen3 q_norm/k_norm: RMSNorm of every q and k head of qkv into out (v heads copied); rstd (rows, NH + NKV). */
export function headRmsnormForward(
  engine: Engine,
  a: {
    qkv: Tensor;
    qWeight: Tensor;
    kWeight: Tensor;
    out: Tensor;
    rstd: Tensor;
    rows: number;
    NH: number;
    NKV: number;
    HS: number;
    eps: number;
  },
): void {
  const { qkv, qWeight, kWeight, out, rstd, rows, NH, NKV, HS, eps } = a;
  checkShape('headRmsnormForward', { qkv, qWeight, kWeight, out, rstd }, a);
  engine.dispatch(forwardSpecs[widestVector(HS)], {
    bindings: { qkv, qWeight, kWeight, out, rstd },
    uniforms: { rows, NH, NKV, HS, eps },
    workgroups: foldWorkgroups(Math.ceil((rows * (NH + 2 * NKV)) / WG)),
  });
}

/** dQkv (overwritten; v heads get dOut) and dQWeight, dKWeight (added to) of headRmsnormForward. */
export function headRmsnormBackward(
  engine: Engine,
  a: {
    qkv: Tensor;
    qWeight: Tensor;
    kWeight: Tensor;
    rstd: Tensor;
    dOut: Tensor;
    dQkv: Tensor;
    dQWeight: Tensor;
    dKWeight: Tensor;
    rows: number;
    NH: number;
    NKV: number;
    HS: number;
  },
): void {
  const { qkv, qWeight, kWeight, rstd, dOut, dQkv, dQWeight, dKWeight, rows, NH, NKV, HS } = a;
  checkShape('headRmsnormBackward', { qkv, qWeight, kWeight, rstd, dOut, dQkv, dQWeight, dKWeight }, a);
  const width = widestVector(HS);
  const tilesPerWeight = Math.ceil(HS / width / TILE_COLS);
  engine.dispatch(backwardSpecs[width], {
    bindings: { qkv, qWeight, kWeight, rstd, dOut, dQkv, dQWeight, dKWeight },
    uniforms: { rows, NH, NKV, HS },
    workgroups: foldWorkgroups(2 * tilesPerWeight + Math.ceil((rows * (NH + 2 * NKV)) / WG)),
  });
}
