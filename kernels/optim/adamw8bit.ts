import adamw8bitSource from './adamw8bit.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize, foldWorkgroups } from '../../engine/index.ts';
import { OPTIMIZER_8BIT_BLOCK } from '../../engine/dynamic-map.ts';
import type { AdamwHyperparameters } from './adamw.ts';

export const adamw8bitSpec: KernelSpec = {
  name: 'adamw8bit',
  source: adamw8bitSource,
  bindings: [
    { name: 'param', access: 'read_write', type: 'vec4<f32>' },
    { name: 'grad', access: 'read', type: 'vec4<f32>' },
    { name: 'state1', access: 'read_write', type: 'u32' },
    { name: 'state2', access: 'read_write', type: 'u32' },
    { name: 'absmax1', access: 'read_write' },
    { name: 'absmax2', access: 'read_write' },
    { name: 'qmap', access: 'read' },
    { name: 'normSquared', access: 'read' },
  ],
  uniforms: [
    { name: 'n', type: 'u32' },
    { name: 'blocks', type: 'u32' },
    { name: 'maxNorm', type: 'f32' },
    { name: 'gradScale', type: 'f32' },
    { name: 'beta1', type: 'f32' },
    { name: 'beta2', type: 'f32' },
    { name: 'epsScaled', type: 'f32' },
    { name: 'stepSize', type: 'f32' },
    { name: 'decay', type: 'f32' },
  ],
};

/** The 8-bit state of `count` values: u32 words of codes per moment and float32 scales per block of 256. */
export function adamw8bitSizes(count: number): { words: number; blocks: number } {
  return { words: Math.ceil(count / 4), blocks: Math.ceil(count / OPTIMIZER_8BIT_BLOCK) };
}

/** Elements per dispatch of one tensor: whole groups of 64 blocks, so every window of the absmax (one float per
 *  block) starts on a 256-byte binding offset, as do the code words and the parameters. */
const WINDOW_QUANTUM = 64 * OPTIMIZER_8BIT_BLOCK;

/**
 * One bitsandbytes AdamW8bit step over one parameter tensor of `count` values (params and grads: views of it padded
 * to whole vec4s; state1/state2/absmax1/absmax2: its 8-bit state, adamw8bitSizes(count)); `qmap` holds the signed
 * then the unsigned dynamic code (512 values). Clipping and gradScale as adamwStep; step counts from 1.
 */
export function adamw8bitStep(
  engine: Engine,
  a: AdamwHyperparameters & {
    params: Tensor;
    grads: Tensor;
    state1: Tensor;
    state2: Tensor;
    absmax1: Tensor;
    absmax2: Tensor;
    qmap: Tensor;
    normSquared: Tensor;
    count: number;
  },
): void {
  const { count, step } = a;
  const padded = Math.ceil(count / 4) * 4;
  const { words, blocks } = adamw8bitSizes(count);
  expectSize('adamw8bitStep', 'params', a.params, padded, `[${padded}] (${count} values in whole vec4s)`);
  expectSize('adamw8bitStep', 'grads', a.grads, padded, `[${padded}] (${count} values in whole vec4s)`);
  for (const [what, t, size] of [
    ['state1', a.state1, words],
    ['state2', a.state2, words],
    ['absmax1', a.absmax1, blocks],
    ['absmax2', a.absmax2, blocks],
  ] as const) {
    expectSize('adamw8bitStep', what, t, size, `[${size}] for ${count} values`);
  }
  expectSize('adamw8bitStep', 'qmap', a.qmap, 512, '[512] (signed then unsigned code)');
  expectSize('adamw8bitStep', 'normSquared', a.normSquared, 1, '[1]', 'at least');
  if (!Number.isInteger(step) || step < 1)
    throw new Error(`adamw8bitStep: step is ${step}, expected an integer counting from 1`);
  // Step-dependent factors once, in float64 (bitsandbytes computes them per thread in float32).
  const correction2 = Math.sqrt(1 - a.beta2 ** step);
  const uniforms = {
    maxNorm: a.maxNorm,
    gradScale: a.gradScale ?? 1,
    beta1: a.beta1,
    beta2: a.beta2,
    epsScaled: a.eps * correction2,
    stepSize: (-a.lr * correction2) / (1 - a.beta1 ** step),
    decay: a.weightDecay > 0 ? 1 - a.lr * a.weightDecay : 1,
  };
  // At least one quantum: under a binding limit below 64 KiB (WEBGPU_MAX_BINDING_BYTES; WebGPU's own minimum is 128
  // MiB) a window of 0 would never advance; a tensor that needs more windows is then refused by the binding check.
  const maxWindow = Math.max(WINDOW_QUANTUM, Math.floor(engine.maxBindingBytes / 4 / WINDOW_QUANTUM) * WINDOW_QUANTUM);
  for (let start = 0; start < count; start += maxWindow) {
    const n = Math.min(maxWindow, count - start);
    const window = (t: Tensor, from: number, size: number) =>
      start === 0 && size === t.size ? t : t.view(`${t.name}[${from}:${from + size}]`, from, [size]);
    const nWords = Math.ceil(n / 4);
    const nBlocks = Math.ceil(n / OPTIMIZER_8BIT_BLOCK);
    engine.dispatch(adamw8bitSpec, {
      bindings: {
        param: window(a.params, start, nWords * 4),
        grad: window(a.grads, start, nWords * 4),
        state1: window(a.state1, start / 4, nWords),
        state2: window(a.state2, start / 4, nWords),
        absmax1: window(a.absmax1, start / OPTIMIZER_8BIT_BLOCK, nBlocks),
        absmax2: window(a.absmax2, start / OPTIMIZER_8BIT_BLOCK, nBlocks),
        qmap: a.qmap,
        normSquared: a.normSquared,
      },
      uniforms: { n, blocks: nBlocks, ...uniforms },
      workgroups: foldWorkgroups(nBlocks),
    });
  }
}
