import reduceSource from './reduce.wgsl';
import { type Engine, type Tensor, type KernelSpec, chooseVariant, expectSize } from '../../engine/index.ts';
import type { Variant } from '../../engine/variants.ts';
import { shaderSource, withWorkgroupSum } from './rowwise.ts';
import { scratchTensor } from './scratch.ts';

const LANES = 256;

/** Workgroups (partial sums) per tensor of sumOfSquares's first pass. A GPU wants enough to fill it, and one
 *  workgroup adds up to a few hundred partials; on a CPU each workgroup's tree sum costs 8 barriers, so a few long
 *  workgroups win (the gradient norm of 2^20 elements on lavapipe: 15-27 ms of CPU time with 256 workgroups, 1.5-2 ms
 *  with 8). */
export const sumSquaresVariants: readonly Variant<number>[] = [
  { name: 'few-workgroups', supported: (caps) => caps.deviceClass === 'cpu', value: 8 },
  { name: 'many-workgroups', supported: () => true, value: 256 },
];

export const weightedSumSpec: KernelSpec = {
  name: 'reduce/weighted-sum',
  source: withWorkgroupSum(shaderSource('reduce', reduceSource, 'weighted_sum', 1)),
  entryPoint: 'weighted_sum',
  bindings: [
    { name: 'values', access: 'read' },
    { name: 'weights', access: 'read' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [{ name: 'n', type: 'u32' }],
};

export const sumSquaresSpec: KernelSpec = {
  name: 'reduce/sum-squares',
  source: withWorkgroupSum(shaderSource('reduce', reduceSource, 'sum_squares', 1)),
  entryPoint: 'sum_squares',
  bindings: [
    { name: 'x', access: 'read', type: 'vec4<f32>' },
    { name: 'out', access: 'read_write' },
  ],
  uniforms: [
    { name: 'n4', type: 'u32' },
    { name: 'workgroups', type: 'u32' },
    { name: 'outOffset', type: 'u32' },
    { name: 'square', type: 'u32' },
  ],
};

/**
 * A deterministic weighted sum, for losses: out[0] = Σ values[i]·weights[i] over i < n (single workgroup, fixed order).
 */
export function weightedSum(engine: Engine, a: { values: Tensor; weights: Tensor; out: Tensor; n: number }): void {
  const { values, weights, out, n } = a;
  expectSize('weightedSum', 'values', values, n, `[n=${n}]`, 'at least');
  expectSize('weightedSum', 'weights', weights, n, `[n=${n}]`, 'at least');
  expectSize('weightedSum', 'out', out, 1, '[1]', 'at least');
  engine.dispatch(weightedSumSpec, { bindings: { values, weights, out }, uniforms: { n }, workgroups: [1] });
}

/** out[0] = Σ over all tensors of Σ x², in a fixed order; each tensor's size must be a multiple of 4. */
export function sumOfSquares(engine: Engine, a: { tensors: readonly Tensor[]; out: Tensor }): void {
  const { tensors, out } = a;
  expectSize('sumOfSquares', 'out', out, 1, '[1]', 'at least');
  const maxPartials = chooseVariant('sum-squares', sumSquaresVariants, engine.caps, engine.knobs).value;
  const workgroupCounts = tensors.map((t) => {
    if (t.size % 4 !== 0) {
      throw new Error(
        `sumOfSquares: ${t.name} has ${t.size} elements, expected a multiple of 4 (arena segments are padded to 64)`,
      );
    }
    return Math.max(1, Math.min(maxPartials, Math.ceil(t.size / 4 / LANES)));
  });
  const used = workgroupCounts.reduce((s, c) => s + c, 0);
  // Padded to whole vec4s for stage 2. The key names `used` so no call with another split ever writes the
  // padding, which therefore stays zero.
  const count = Math.ceil(used / 4) * 4;
  const partials = scratchTensor(engine, `sum-squares/partials-of-${used}`, [count]);
  let outOffset = 0;
  tensors.forEach((x, i) => {
    const workgroups = workgroupCounts[i];
    engine.dispatch(sumSquaresSpec, {
      bindings: { x, out: partials },
      uniforms: { n4: x.size / 4, workgroups, outOffset, square: 1 },
      workgroups: [workgroups],
    });
    outOffset += workgroups;
  });
  engine.dispatch(sumSquaresSpec, {
    bindings: { x: partials, out },
    uniforms: { n4: count / 4, workgroups: 1, outOffset: 0, square: 0 },
    workgroups: [1],
  });
}
