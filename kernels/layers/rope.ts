import ropeSource from './rope.wgsl';
import ropeAngleSource from './rope-angle.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups, expectSize } from '../../engine/index.ts';
import { shaderSource, specsByWidth, vectorElementType, widestVector } from '../util/rowwise.ts';

// Must match WG in rope.wgsl.
const WG = 64;

const ropeSpecs = specsByWidth(
  (width): KernelSpec => ({
    name: `rope/vec${width}`,
    source: shaderSource('rope', `${ropeAngleSource}\n${ropeSource}`, null, width),
    bindings: [
      { name: 'positions', access: 'read', type: 'i32' },
      { name: 'invFreq', access: 'read', type: vectorElementType(width) },
      // Activations in the forward, their gradients in the backward.
      { name: 'qkv', access: 'read_write', type: vectorElementType(width) },
    ],
    uniforms: [
      { name: 'rows', type: 'u32' },
      { name: 'heads', type: 'u32' },
      { name: 'HS', type: 'u32' },
      { name: 'rowStride', type: 'u32' },
      { name: 'colOffset', type: 'u32' },
      { name: 'sinSign', type: 'f32' },
    ],
  }),
);

/** HF's inv_freq for head size HS with its f32 roundings: 1 / theta ** (arange(0, HS, 2).float() / HS). */
export function ropeInverseFrequencies(HS: number, theta: number): Float32Array {
  const base = Math.fround(theta);
  return Float32Array.from({ length: HS / 2 }, (_, i) => 1 / Math.fround(base ** Math.fround((2 * i) / HS)));
}

// One small table per (engine, HS, theta), uploaded on first use: the launcher API passes theta, not a tensor.
const inverseFrequencyTables = new WeakMap<Engine, Map<string, Tensor>>();

export function inverseFrequencyTable(engine: Engine, HS: number, theta: number): Tensor {
  let tables = inverseFrequencyTables.get(engine);
  if (!tables) inverseFrequencyTables.set(engine, (tables = new Map()));
  const key = `${HS}/${theta}`;
  let table = tables.get(key);
  if (!table) {
    table = engine.tensorFrom(`rope.invFreq[HS=${HS}, theta=${theta}]`, [HS / 2], ropeInverseFrequencies(HS, theta));
    tables.set(key, table);
  }
  return table;
}

export interface RopeArgs {
  positions: Tensor<'i32'>;
  rows: number;
  NH: number;
  NKV: number;
  HS: number;
  theta: number;
  /** Elements from one row to the next; (NH + 2*NKV)*HS (the fused qkv buffer) when omitted. */
  rowStride?: number;
  /** Element where row 0's first head starts (e.g. a KV-cache row range); 0 when omitted. */
  colOffset?: number;
}

function rotate(engine: Engine, launcher: string, what: string, qkv: Tensor, a: RopeArgs, sinSign: number): void {
  const { positions, rows, NH, NKV, HS, theta } = a;
  const rowStride = a.rowStride ?? (NH + 2 * NKV) * HS;
  const colOffset = a.colOffset ?? 0;
  if (HS % 2 !== 0) throw new Error(`${launcher}: HS=${HS} must be even (rotate_half pairs d with d + HS/2)`);
  if (rowStride < (NH + NKV) * HS) {
    throw new Error(
      `${launcher}: rowStride=${rowStride} is shorter than the ${NH + NKV} q and k heads of HS=${HS} it rotates`,
    );
  }
  const needed = rows === 0 ? 0 : colOffset + (rows - 1) * rowStride + (NH + NKV) * HS;
  expectSize(
    launcher,
    what,
    qkv,
    needed,
    `colOffset ${colOffset} + (rows ${rows} - 1) * rowStride ${rowStride} + (NH + NKV) * HS = (${NH} + ${NKV}) * ${HS}`,
    'at least',
  );
  expectSize(launcher, 'positions', positions, rows, `[rows=${rows}]`);
  const width = widestVector(HS / 2, rowStride, colOffset);
  engine.dispatch(ropeSpecs[width], {
    bindings: { positions, invFreq: inverseFrequencyTable(engine, HS, theta), qkv },
    uniforms: { rows, heads: NH + NKV, HS, rowStride, colOffset, sinSign },
    workgroups: foldWorkgroups(Math.ceil((rows * HS) / 2 / width / WG)),
  });
}

/** Rotates the q and k heads of qkv (rows, (NH + 2*NKV)*HS) in place by position * inv_freq (HF rotate_half). */
export function ropeForward(engine: Engine, a: RopeArgs & { qkv: Tensor }): void {
  rotate(engine, 'ropeForward', 'qkv', a.qkv, a, 1);
}

/** The gradient through ropeForward, in place on dQkv: the rotation by -angle. */
export function ropeBackward(engine: Engine, a: RopeArgs & { dQkv: Tensor }): void {
  rotate(engine, 'ropeBackward', 'dQkv', a.dQkv, a, -1);
}
