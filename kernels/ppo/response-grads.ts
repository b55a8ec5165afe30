import source from './response-grads.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups, expectSize } from '../../engine/index.ts';

export const responseGradsSpec: KernelSpec = {
  name: 'response-grads',
  source,
  bindings: [
    { name: 'grads', access: 'read', type: 'vec2<f32>' },
    { name: 'dLogprobs', access: 'read_write' },
    { name: 'dEntropy', access: 'read_write' },
  ],
  uniforms: [
    { name: 'B', type: 'u32' },
    { name: 'S', type: 'u32' },
    { name: 'T', type: 'u32' },
  ],
};

/** Scatters the actor loss's [B, T, 2] token gradients to the [B, S] rows the LM head backward consumes. */
export function scatterResponseGradsGpu(
  engine: Engine,
  a: { grads: Tensor; dLogprobs: Tensor; dEntropy: Tensor; B: number; S: number; T: number },
): void {
  const { B, S, T } = a;
  if (T + 1 > S)
    throw new Error(
      `response-grads: a response of T=${T} tokens needs a sequence of at least T+1 positions, got S=${S}`,
    );
  expectSize('response-grads', 'grads', a.grads, 2 * B * T, `[B=${B}, T=${T}, 2]`);
  expectSize('response-grads', 'dLogprobs', a.dLogprobs, B * S, `[B=${B}, S=${S}]`);
  expectSize('response-grads', 'dEntropy', a.dEntropy, B * S, `[B=${B}, S=${S}]`);
  engine.dispatch(responseGradsSpec, {
    bindings: { grads: a.grads, dLogprobs: a.dLogprobs, dEntropy: a.dEntropy },
    uniforms: { B, S, T },
    workgroups: foldWorkgroups(Math.ceil((B * S) / 256)),
  });
}
