import source from './value-loss.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize } from '../../engine/index.ts';
import { aggregationUniforms, expectRows, withWorkgroupReduce } from './ppo-shared.ts';
import { reduceLossPartials } from './loss-partials.ts';
import type { LossAggregation } from './ppo-vocabulary.ts';

export const valueLossSpec: KernelSpec = {
  name: 'value-loss',
  source: withWorkgroupReduce(source),
  bindings: [
    { name: 'vpreds', access: 'read' },
    { name: 'returns', access: 'read' },
    { name: 'values', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'gradVpreds', access: 'read_write' },
    { name: 'rowPartials', access: 'read_write' },
  ],
  uniforms: [
    { name: 'T', type: 'u32' },
    { name: 'cliprangeValue', type: 'f32' },
    { name: 'aggMode', type: 'u32' },
    { name: 'aggScale', type: 'f32' },
  ],
};

/**
 * verl's compute_value_loss: out [3] = (vf_loss, vf_clipfrac, token count); gradVpreds [B, T]. rowPartials: scratch [B,
 * 3].
 */
export function computeValueLossGpu(
  engine: Engine,
  args: {
    vpreds: Tensor;
    returns: Tensor;
    values: Tensor;
    responseMask: Tensor;
    gradVpreds: Tensor;
    rowPartials: Tensor;
    out: Tensor;
    cliprangeValue: number;
    aggregation: LossAggregation;
    B: number;
    T: number;
  },
): void {
  const { B, T } = args;
  expectRows('value-loss', B, T);
  for (const [t, what] of [
    [args.vpreds, 'vpreds'],
    [args.returns, 'returns'],
    [args.values, 'values'],
    [args.responseMask, 'responseMask'],
    [args.gradVpreds, 'gradVpreds'],
  ] as const)
    expectSize('value-loss', what, t, B * T, `[B=${B}, T=${T}]`);
  expectSize('value-loss', 'rowPartials', args.rowPartials, 3 * B, `[B=${B}, 3]`);
  const agg = aggregationUniforms(args.aggregation);
  engine.dispatch(valueLossSpec, {
    bindings: {
      vpreds: args.vpreds,
      returns: args.returns,
      values: args.values,
      mask: args.responseMask,
      gradVpreds: args.gradVpreds,
      rowPartials: args.rowPartials,
    },
    uniforms: { T, cliprangeValue: args.cliprangeValue, aggMode: agg.mode, aggScale: agg.scale },
    workgroups: [B],
  });
  reduceLossPartials(engine, args.rowPartials, args.out, B, 3, [1], 2);
}
