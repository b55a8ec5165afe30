import source from './gae.wgsl';
import { type Engine, type Tensor, type KernelSpec, expectSize } from '../../engine/index.ts';
import { maskedWhitenGpu } from './masked-stats.ts';

export const gaeSpec: KernelSpec = {
  name: 'gae',
  source,
  bindings: [
    { name: 'rewards', access: 'read' },
    { name: 'values', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'advantages', access: 'read_write' },
    { name: 'returns', access: 'read_write' },
  ],
  uniforms: [
    { name: 'B', type: 'u32' },
    { name: 'T', type: 'u32' },
    { name: 'gamma', type: 'f32' },
    { name: 'lam', type: 'f32' },
  ],
};

/** verl's compute_gae_advantage_return: the reverse scan, then masked whitening of the advantages in place. */
export function computeGaeAdvantageReturnGpu(
  engine: Engine,
  args: {
    tokenLevelRewards: Tensor;
    values: Tensor;
    responseMask: Tensor;
    advantages: Tensor;
    returns: Tensor;
    /** Scratch [4] for the whitening statistics. */
    stats: Tensor;
    gamma: number;
    lam: number;
    B: number;
    T: number;
  },
): void {
  const { B, T } = args;
  for (const [t, what] of [
    [args.tokenLevelRewards, 'tokenLevelRewards'],
    [args.values, 'values'],
    [args.responseMask, 'responseMask'],
    [args.advantages, 'advantages'],
    [args.returns, 'returns'],
  ] as const)
    expectSize('gae', what, t, B * T, `[B=${B}, T=${T}]`);
  engine.dispatch(gaeSpec, {
    bindings: {
      rewards: args.tokenLevelRewards,
      values: args.values,
      mask: args.responseMask,
      advantages: args.advantages,
      returns: args.returns,
    },
    uniforms: { B, T, gamma: args.gamma, lam: args.lam },
    workgroups: [Math.ceil(B / 64)],
  });
  maskedWhitenGpu(engine, { values: args.advantages, mask: args.responseMask, stats: args.stats });
}
