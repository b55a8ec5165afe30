// Plain arrays in and out of the GPU for the user-facing ppo/ functions: verl's [B, T] (and [B, T, V])
// nested lists become flat row-major tensors and come back nested.
import type { Engine, Tensor } from '../../engine/index.ts';

export type Matrix = readonly (readonly number[])[];

export interface Shape2 {
  B: number;
  T: number;
}

export function shapeOf(name: string, m: Matrix): Shape2 {
  const B = m.length;
  const T = B > 0 ? m[0].length : 0;
  if (B === 0 || T === 0) throw new Error(`${name}: expected a non-empty [B, T] matrix, got [${B}, ${T}]`);
  m.forEach((row, b) => {
    if (row.length !== T) throw new Error(`${name}: row ${b} has ${row.length} entries, expected ${T} like row 0`);
  });
  return { B, T };
}

export function sameShape(name: string, m: Matrix, shape: Shape2): void {
  const s = shapeOf(name, m);
  if (s.B !== shape.B || s.T !== shape.T)
    throw new Error(`${name}: shape [${s.B}, ${s.T}], expected [${shape.B}, ${shape.T}]`);
}

export function flatten(m: Matrix): Float32Array {
  return Float32Array.from(m.flat());
}

export function toMatrix(flat: ArrayLike<number>, B: number, T: number): number[][] {
  return Array.from({ length: B }, (_, b) => Array.from({ length: T }, (_, t) => flat[b * T + t]));
}

export function upload(engine: Engine, name: string, m: Matrix): Tensor {
  const { B, T } = shapeOf(name, m);
  return engine.tensorFrom(name, [B, T], flatten(m));
}

export async function readMatrix(engine: Engine, t: Tensor, B: number, T: number): Promise<number[][]> {
  return toMatrix(await engine.read(t), B, T);
}
