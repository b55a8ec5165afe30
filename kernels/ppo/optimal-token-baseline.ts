import source from './optimal-token-baseline.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups, expectSize } from '../../engine/index.ts';
import { expectRows } from './ppo-shared.ts';
import { wgslSections } from '../util/rowwise.ts';

const uniforms = [
  { name: 'B', type: 'u32' },
  { name: 'T', type: 'u32' },
  { name: 'epsilon', type: 'f32' },
  { name: 'useIs', type: 'u32' },
] as const;

export const otbRowsSpec: KernelSpec = {
  name: 'optimal-token-baseline/rows',
  source: wgslSections('optimal-token-baseline', source, 'rows'),
  entryPoint: 'rowsMain',
  bindings: [
    { name: 'rewards', access: 'read' },
    { name: 'mask', access: 'read' },
    { name: 'oldLogProbs', access: 'read' },
    { name: 'sumPiSquared', access: 'read' },
    { name: 'isWeights', access: 'read' },
    { name: 'pathWeight', access: 'read_write' },
    { name: 'returns', access: 'read_write' },
  ],
  uniforms: [...uniforms],
};

export const otbBaselineSpec: KernelSpec = {
  name: 'optimal-token-baseline/baseline',
  source: wgslSections('optimal-token-baseline', source, 'baseline'),
  entryPoint: 'baselineMain',
  bindings: [
    { name: 'mask', access: 'read' },
    { name: 'groupOf', access: 'read', type: 'u32' },
    { name: 'groupStart', access: 'read', type: 'u32' },
    { name: 'groupMembers', access: 'read', type: 'u32' },
    { name: 'tailStart', access: 'read', type: 'u32' },
    { name: 'pathWeight', access: 'read' },
    { name: 'returns', access: 'read' },
    { name: 'advantages', access: 'read_write' },
  ],
  uniforms: [...uniforms],
};

/**
 * verl's optimal_token_baseline: advantages (G − B_t)·mask and returns G (the reward-to-go), B_t the per-column
 * group baseline weighted by the cumulative path variance W_t. tailStart [B] (u32): zero-tail.ts's columns.
 */
export function computeOptimalTokenBaselineGpu(engine: Engine, a: {
  tokenLevelRewards: Tensor; responseMask: Tensor; oldLogProbs: Tensor; sumPiSquared: Tensor; rolloutIsWeights?: Tensor | null;
  groupOf: Tensor; groupStart: Tensor; groupMembers: Tensor; tailStart: Tensor;
  /** Scratch [B, T]: W. */
  pathWeight: Tensor; advantages: Tensor; returns: Tensor; epsilon: number; B: number; T: number;
}): void {
  const { B, T } = a;
  expectRows('optimal_token_baseline', B, T);
  for (const [t, what] of [[a.tokenLevelRewards, 'tokenLevelRewards'], [a.responseMask, 'responseMask'], [a.oldLogProbs, 'oldLogProbs'],
    [a.sumPiSquared, 'sumPiSquared'], [a.pathWeight, 'pathWeight'], [a.advantages, 'advantages'], [a.returns, 'returns']] as const) {
    expectSize('optimal_token_baseline', what, t, B * T, `[B=${B}, T=${T}]`);
  }
  if (a.rolloutIsWeights) expectSize('optimal_token_baseline', 'rolloutIsWeights', a.rolloutIsWeights, B * T, `[B=${B}, T=${T}]`);
  expectSize('optimal_token_baseline', 'tailStart', a.tailStart, B, `[B=${B}]`);
  const u = { B, T, epsilon: a.epsilon, useIs: a.rolloutIsWeights ? 1 : 0 };
  engine.dispatch(otbRowsSpec, {
    bindings: { rewards: a.tokenLevelRewards, mask: a.responseMask, oldLogProbs: a.oldLogProbs, sumPiSquared: a.sumPiSquared,
      isWeights: a.rolloutIsWeights ?? a.oldLogProbs, pathWeight: a.pathWeight, returns: a.returns },
    uniforms: u, workgroups: [Math.ceil(B / 64)],
  });
  engine.dispatch(otbBaselineSpec, {
    bindings: { mask: a.responseMask, groupOf: a.groupOf, groupStart: a.groupStart, groupMembers: a.groupMembers, tailStart: a.tailStart,
      pathWeight: a.pathWeight, returns: a.returns, advantages: a.advantages },
    uniforms: u, workgroups: foldWorkgroups(Math.ceil((B * T) / 64)),
  });
}
