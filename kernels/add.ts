import addSource from './add.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups } from '../engine/index.ts';

export const addSpec: KernelSpec = {
  name: 'add',
  source: addSource,
  bindings: [
    { name: 'a', access: 'read' },
    { name: 'b', access: 'read' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [
    { name: 'n', type: 'u32' },
    { name: 'alpha', type: 'f32' },
    { name: 'beta', type: 'f32' },
  ],
};

/** out = alpha·a + beta·b, elementwise; `out` may alias neither input. */
export function add(engine: Engine, a: Tensor, b: Tensor, out: Tensor, alpha = 1, beta = 1): void {
  if (a.size !== b.size || a.size !== out.size) {
    throw new Error(`add: sizes differ (${a.name} ${a.size}, ${b.name} ${b.size}, ${out.name} ${out.size})`);
  }
  engine.dispatch(addSpec, {
    bindings: { a, b, out },
    uniforms: { n: a.size, alpha, beta },
    workgroups: foldWorkgroups(Math.ceil(a.size / 256)),
  });
}
