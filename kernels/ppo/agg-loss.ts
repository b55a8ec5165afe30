// Harness only, not on the training path: tools/verl/losses.ts and tests dispatch agg-loss (policy-loss and
// value-loss aggregate in their own kernels).
import source from './agg-loss.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize } from '../../engine/index.ts';
import { aggregationUniforms, expectRows, withWorkgroupReduce } from './ppo-shared.ts';
import { reduceLossPartials } from './loss-partials.ts';
import type { LossAggregation } from './ppo-vocabulary.ts';

export const aggLossSpec: KernelSpec = {
  name: 'agg-loss',
  source: withWorkgroupReduce(source),
  bindings: [
    { name: 'lossMat', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'grad', access: 'read_write' },
    { name: 'rowPartials', access: 'read_write' },
  ],
  uniforms: [
    { name: 'T', type: 'u32' },
    { name: 'aggMode', type: 'u32' },
    { name: 'aggScale', type: 'f32' },
  ],
};

/** verl's agg_loss: out [2] = (loss, mask count); grad [B, T] = d loss / d lossMat. rowPartials is scratch [2B]. */
export function aggLossGpu(
  engine: Engine,
  args: {
    lossMat: Tensor;
    lossMask: Tensor;
    aggregation: LossAggregation;
    grad: Tensor;
    rowPartials: Tensor;
    out: Tensor;
    B: number;
    T: number;
  },
): void {
  const { B, T } = args;
  expectRows('agg-loss', B, T);
  for (const [t, what] of [
    [args.lossMat, 'lossMat'],
    [args.lossMask, 'lossMask'],
    [args.grad, 'grad'],
  ] as const)
    expectSize('agg-loss', what, t, B * T, `[B=${B}, T=${T}]`);
  const agg = aggregationUniforms(args.aggregation);
  engine.dispatch(aggLossSpec, {
    bindings: { lossMat: args.lossMat, mask: args.lossMask, grad: args.grad, rowPartials: args.rowPartials },
    uniforms: { T, aggMode: agg.mode, aggScale: agg.scale },
    workgroups: [B],
  });
  reduceLossPartials(engine, args.rowPartials, args.out, B, 2, [], 1);
}
