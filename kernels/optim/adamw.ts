import adamwSource from './adamw.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  expectSize,
  foldWorkgroups,
  shapeString,
} from '../../engine/index.ts';
import { sumOfSquares } from '../util/reduce.ts';

export const adamwSpec: KernelSpec = {
  name: 'adamw',
  source: adamwSource,
  bindings: [
    { name: 'param', access: 'read_write', type: 'vec4<f32>' },
    { name: 'grad', access: 'read', type: 'vec4<f32>' },
    { name: 'expAvg', access: 'read_write', type: 'vec4<f32>' },
    { name: 'expAvgSq', access: 'read_write', type: 'vec4<f32>' },
    { name: 'normSquared', access: 'read' },
  ],
  uniforms: [
    { name: 'n4', type: 'u32' },
    { name: 'maxNorm', type: 'f32' },
    { name: 'gradScale', type: 'f32' },
    { name: 'beta1', type: 'f32' },
    { name: 'beta2', type: 'f32' },
    { name: 'eps', type: 'f32' },
    { name: 'decayBefore', type: 'f32' },
    { name: 'decayAfter', type: 'f32' },
    { name: 'stepSize', type: 'f32' },
    { name: 'biasCorrection2Sqrt', type: 'f32' },
  ],
};

/**
 * One AdamW step's settings, shared by the float32 and 8-bit kernels and their references: clipping to `maxNorm` (≤ 0
 * disables it) of the gradients times `gradScale` (default 1), and `step` counting from 1.
 */
export interface AdamwHyperparameters {
  maxNorm: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  step: number;
  gradScale?: number;
}

/** normSquared[0] = Σ g² over every gradient segment, in a fixed order (no readback: adamwStep reads it on the GPU). */
export function gradNormSquared(engine: Engine, a: { grads: readonly Tensor[]; normSquared: Tensor }): void {
  sumOfSquares(engine, { tensors: a.grads, out: a.normSquared });
}

/**
 * One torch.optim.AdamW step over a segment (params, grads, m, v: matching tensors of one arena layout), after
 * grads·gradScale and torch.nn.utils.clip_grad_norm_(maxNorm) with the global norm |gradScale|·√normSquared[0].
 * step counts from 1. maxNorm ≤ 0 disables clipping. `decay: 'after'` applies the weight decay after the step, as
 * bitsandbytes' optimizers do (AdamW8bit's 32-bit state for small tensors), instead of torch's before.
 */
export function adamwStep(
  engine: Engine,
  a: AdamwHyperparameters & {
    params: Tensor;
    grads: Tensor;
    m: Tensor;
    v: Tensor;
    normSquared: Tensor;
    decay?: 'before' | 'after';
  },
): void {
  const { params, grads, m, v, normSquared, step } = a;
  for (const [what, t] of [
    ['grads', grads],
    ['m', m],
    ['v', v],
  ] as const) {
    expectSize(
      'adamwStep',
      what,
      t,
      params.size,
      `params' shape (tensor ${params.name}, ${shapeString(params.shape)})`,
    );
  }
  if (params.size % 4 !== 0) {
    throw new Error(
      `adamwStep: ${params.name} has ${params.size} elements, expected a multiple of 4 (arena segments are padded to ` +
        `64)`,
    );
  }
  expectSize('adamwStep', 'normSquared', normSquared, 1, '[1]', 'at least');
  if (!Number.isInteger(step) || step < 1)
    throw new Error(`adamwStep: step is ${step}, expected an integer counting from 1`);
  const n4 = params.size / 4;
  engine.dispatch(adamwSpec, {
    bindings: { param: params, grad: grads, expAvg: m, expAvgSq: v, normSquared },
    uniforms: {
      n4,
      maxNorm: a.maxNorm,
      gradScale: a.gradScale ?? 1,
      beta1: a.beta1,
      beta2: a.beta2,
      eps: a.eps,
      // Step-dependent factors once, in float64, instead of a pow per lane in f32.
      decayBefore: a.decay === 'after' ? 1 : 1 - a.lr * a.weightDecay,
      decayAfter: a.decay === 'after' ? 1 - a.lr * a.weightDecay : 1,
      stepSize: a.lr / (1 - a.beta1 ** step),
      biasCorrection2Sqrt: Math.sqrt(1 - a.beta2 ** step),
    },
    workgroups: foldWorkgroups(Math.ceil(n4 / 256)),
  });
}
