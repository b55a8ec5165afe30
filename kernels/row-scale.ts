import source from './row-scale.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups } from '../engine/index.ts';
import { expectSize } from './ppo-shared.ts';

export const rowScaleSpec: KernelSpec = {
  name: 'row-scale',
  source,
  bindings: [
    { name: 'scale', access: 'read' },
    { name: 'values', access: 'read_write' },
  ],
  uniforms: [
    { name: 'B', type: 'u32' },
    { name: 'T', type: 'u32' },
  ],
};

/** values [B, T] ·= scale [B], in place. */
export function rowScaleGpu(engine: Engine, values: Tensor, scale: Tensor, B: number, T: number): void {
  expectSize('row-scale', values, B * T, 'values [B, T]');
  expectSize('row-scale', scale, B, 'scale [B]');
  engine.dispatch(rowScaleSpec, { bindings: { scale, values }, uniforms: { B, T }, workgroups: foldWorkgroups(Math.ceil((B * T) / 256)) });
}
