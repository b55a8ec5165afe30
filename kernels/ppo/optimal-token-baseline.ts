import source from './optimal-token-baseline.wgsl';
import { type Engine, type Tensor, type KernelSpec, foldWorkgroups, expectSize } from '../../engine/index.ts';
import { expectRows } from './ppo-shared.ts';
import { wgslSections } from '../util/rowwise.ts';

const uniforms = [
  { name: 'B', type: 'u32' },
  { name: 'T', type: 'u32' },
  { name: 'epsilon', type: 'f32' },
  { name: 'useIs', type: 'u32' },
  { name: 'compact', type: 'u32' },
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
    { name: 'returns', access: 'read_write' },
    { name: 'slotWeights', access: 'read_write', type: 'vec2<f32>' },
  ],
  uniforms: [...uniforms],
};

export const otbBaselineSpec: KernelSpec = {
  name: 'optimal-token-baseline/baseline',
  source: wgslSections('optimal-token-baseline', source, 'baseline'),
  entryPoint: 'baselineMain',
  bindings: [
    { name: 'groupOf', access: 'read', type: 'u32' },
    { name: 'groupStart', access: 'read', type: 'u32' },
    { name: 'groupMembers', access: 'read', type: 'u32' },
    { name: 'tailStart', access: 'read', type: 'u32' },
    { name: 'slotWeights', access: 'read', type: 'vec2<f32>' },
    { name: 'slotBaseline', access: 'read_write' },
  ],
  uniforms: [...uniforms],
};

export const otbScatterSpec: KernelSpec = {
  name: 'optimal-token-baseline/scatter',
  source: wgslSections('optimal-token-baseline', source, 'scatter'),
  entryPoint: 'scatterMain',
  bindings: [
    { name: 'mask', access: 'read' },
    { name: 'returns', access: 'read' },
    { name: 'slotBaseline', access: 'read' },
    { name: 'advantages', access: 'read_write' },
  ],
  uniforms: [...uniforms],
};

/**
 * verl's optimal_token_baseline (compact false) and tir_optimal_token_baseline (compact true: each row's masked tokens
 * compacted into consecutive slots, see the .wgsl header): advantages (G − B)·mask and returns G (the reward-to-go), B
 * the per-slot group baseline weighted by the cumulative path variance W. tailStart [B] (u32): zero-tail.ts's first
 * slot without a baseline. With compact, the caller's groups leave out the rows with no masked token.
 */
export function computeOptimalTokenBaselineGpu(
  engine: Engine,
  a: {
    tokenLevelRewards: Tensor;
    responseMask: Tensor;
    oldLogProbs: Tensor;
    sumPiSquared: Tensor;
    rolloutIsWeights?: Tensor | null;
    groupOf: Tensor;
    groupStart: Tensor;
    groupMembers: Tensor;
    tailStart: Tensor;
    /** Scratch: [B, T, 2] (G·W·mask, W·mask) per slot, [B, T] the baseline per slot. */
    slotWeights: Tensor;
    slotBaseline: Tensor;
    advantages: Tensor;
    returns: Tensor;
    compact: boolean;
    epsilon: number;
    B: number;
    T: number;
  },
): void {
  const { B, T } = a;
  expectRows('optimal_token_baseline', B, T);
  for (const [t, what] of [
    [a.tokenLevelRewards, 'tokenLevelRewards'],
    [a.responseMask, 'responseMask'],
    [a.oldLogProbs, 'oldLogProbs'],
    [a.sumPiSquared, 'sumPiSquared'],
    [a.slotBaseline, 'slotBaseline'],
    [a.advantages, 'advantages'],
    [a.returns, 'returns'],
  ] as const) {
    expectSize('optimal_token_baseline', what, t, B * T, `[B=${B}, T=${T}]`);
  }
  if (a.rolloutIsWeights)
    expectSize('optimal_token_baseline', 'rolloutIsWeights', a.rolloutIsWeights, B * T, `[B=${B}, T=${T}]`);
  expectSize('optimal_token_baseline', 'slotWeights', a.slotWeights, B * T * 2, `[B=${B}, T=${T}, 2]`);
  expectSize('optimal_token_baseline', 'tailStart', a.tailStart, B, `[B=${B}]`);
  const u = { B, T, epsilon: a.epsilon, useIs: a.rolloutIsWeights ? 1 : 0, compact: a.compact ? 1 : 0 };
  engine.dispatch(otbRowsSpec, {
    bindings: {
      rewards: a.tokenLevelRewards,
      mask: a.responseMask,
      oldLogProbs: a.oldLogProbs,
      sumPiSquared: a.sumPiSquared,
      isWeights: a.rolloutIsWeights ?? a.oldLogProbs,
      returns: a.returns,
      slotWeights: a.slotWeights,
    },
    uniforms: u,
    workgroups: [Math.ceil(B / 64)],
  });
  engine.dispatch(otbBaselineSpec, {
    bindings: {
      groupOf: a.groupOf,
      groupStart: a.groupStart,
      groupMembers: a.groupMembers,
      tailStart: a.tailStart,
      slotWeights: a.slotWeights,
      slotBaseline: a.slotBaseline,
    },
    uniforms: u,
    workgroups: foldWorkgroups(Math.ceil((B * T) / 64)),
  });
  engine.dispatch(otbScatterSpec, {
    bindings: { mask: a.responseMask, returns: a.returns, slotBaseline: a.slotBaseline, advantages: a.advantages },
    uniforms: u,
    workgroups: [Math.ceil(B / 64)],
  });
}
