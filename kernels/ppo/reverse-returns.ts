import source from './reverse-returns.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type BindingSpec,
  type UniformSpec,
  expectSize,
} from '../../engine/index.ts';
import { maskedWhitenGpu } from './masked-stats.ts';

const bindings: BindingSpec[] = [
  { name: 'rewards', access: 'read' },
  { name: 'mask', access: 'read' },
  { name: 'baselines', access: 'read' },
  { name: 'returns', access: 'read_write' },
  { name: 'advantages', access: 'read_write' },
];
const uniforms: UniformSpec[] = [
  { name: 'B', type: 'u32' },
  { name: 'T', type: 'u32' },
  { name: 'gamma', type: 'f32' },
  { name: 'carryAcrossMask', type: 'u32' },
];

export const reinforcePlusPlusSpec: KernelSpec = {
  name: 'reverse-returns/reinforce-plus-plus',
  source,
  entryPoint: 'reinforcePlusPlus',
  bindings,
  uniforms,
};
export const remaxSpec: KernelSpec = { name: 'reverse-returns/remax', source, entryPoint: 'remax', bindings, uniforms };

interface ScanArgs {
  tokenLevelRewards: Tensor;
  responseMask: Tensor;
  advantages: Tensor;
  returns: Tensor;
  B: number;
  T: number;
}

function checkScan(op: string, args: ScanArgs): void {
  for (const [t, what] of [
    [args.tokenLevelRewards, 'tokenLevelRewards'],
    [args.responseMask, 'responseMask'],
    [args.advantages, 'advantages'],
    [args.returns, 'returns'],
  ] as const)
    expectSize(op, what, t, args.B * args.T, `[B=${args.B}, T=${args.T}]`);
}

/** verl's compute_reinforce_plus_plus_outcome_advantage: discounted return-to-go, masked-whitened, · mask.
 *  carryAcrossMask (default true, verl 1dda039b): the return carries across mask-0 spans; false: verl b178a3cd's reset
 *  there. */
export function computeReinforcePlusPlusOutcomeAdvantageGpu(
  engine: Engine,
  args: ScanArgs & { gamma: number; stats: Tensor; carryAcrossMask?: boolean },
): void {
  checkScan('reinforce_plus_plus', args);
  engine.dispatch(reinforcePlusPlusSpec, {
    bindings: {
      rewards: args.tokenLevelRewards,
      mask: args.responseMask,
      baselines: args.responseMask,
      returns: args.returns,
      advantages: args.advantages,
    },
    uniforms: { B: args.B, T: args.T, gamma: args.gamma, carryAcrossMask: args.carryAcrossMask === false ? 0 : 1 },
    workgroups: [Math.ceil(args.B / 64)],
  });
  maskedWhitenGpu(engine, {
    values: args.advantages,
    mask: args.responseMask,
    stats: args.stats,
    multiplyByMask: true,
  });
}

/** verl's compute_remax_outcome_advantage with rewardBaselines [B] (the greedy rollout's scores). */
export function computeRemaxOutcomeAdvantageGpu(engine: Engine, args: ScanArgs & { rewardBaselines: Tensor }): void {
  checkScan('remax', args);
  expectSize('remax', 'rewardBaselines', args.rewardBaselines, args.B, `[B=${args.B}]`);
  engine.dispatch(remaxSpec, {
    bindings: {
      rewards: args.tokenLevelRewards,
      mask: args.responseMask,
      baselines: args.rewardBaselines,
      returns: args.returns,
      advantages: args.advantages,
    },
    uniforms: { B: args.B, T: args.T, gamma: 1, carryAcrossMask: 0 },
    workgroups: [Math.ceil(args.B / 64)],
  });
}
