import source from './advantage-outcome.wgsl';
import {
  type Engine,
  type Tensor,
  type KernelSpec,
  type BindingSpec,
  type UniformSpec,
  expectSize,
} from '../../engine/index.ts';
import { expectRows, withWorkgroupReduce } from './ppo-shared.ts';
import { maskedWhitenGpu } from './masked-stats.ts';
import type { OutcomeEstimator } from './ppo-vocabulary.ts';

const bindings: BindingSpec[] = [
  { name: 'rewards', access: 'read' },
  { name: 'mask', access: 'read' },
  { name: 'groupOf', access: 'read', type: 'u32' },
  { name: 'groupStart', access: 'read', type: 'u32' },
  { name: 'groupMembers', access: 'read', type: 'u32' },
  { name: 'rowStats', access: 'read_write' },
  { name: 'advantages', access: 'read_write' },
];
const uniforms: UniformSpec[] = [
  { name: 'T', type: 'u32' },
  { name: 'estimator', type: 'u32' },
  { name: 'epsilon', type: 'f32' },
  { name: 'normByStd', type: 'u32' },
  { name: 'fNorm', type: 'f32' },
  { name: 'varianceFloor', type: 'f32' },
  { name: 'outputWeight', type: 'f32' },
  { name: 'accumulate', type: 'u32' },
];

export const outcomeRowStatsSpec: KernelSpec = {
  name: 'advantage-outcome/row-stats',
  source: withWorkgroupReduce(source),
  entryPoint: 'rowStatsMain',
  bindings,
  uniforms,
};
export const outcomeBroadcastSpec: KernelSpec = {
  name: 'advantage-outcome/broadcast',
  source: withWorkgroupReduce(source),
  entryPoint: 'broadcast',
  bindings,
  uniforms,
};

const ESTIMATOR_CODES: Record<OutcomeEstimator, number> = {
  grpo: 0,
  rloo: 1,
  opo: 2,
  reinforce_plus_plus_baseline: 3,
  grpo_passk: 4,
  grpo_vectorized: 5,
  rloo_vectorized: 6,
  gpg: 7,
};

/** Groups as the kernel reads them: dense ids in order of first appearance and CSR member lists. */
export interface GroupLayout {
  groupOf: Uint32Array;
  groupStart: Uint32Array;
  groupMembers: Uint32Array;
  sizes: number[];
}

/** Maps verl's `index` (uid per sequence, any comparable value) to the CSR layout. */
export function groupLayout(index: readonly unknown[]): GroupLayout {
  const ids = new Map<unknown, number>();
  const groupOf = new Uint32Array(index.length);
  index.forEach((uid, b) => {
    if (!ids.has(uid)) ids.set(uid, ids.size);
    groupOf[b] = ids.get(uid)!;
  });
  const sizes = new Array<number>(ids.size).fill(0);
  for (const g of groupOf) sizes[g]++;
  const groupStart = new Uint32Array(ids.size + 1);
  for (let g = 0; g < ids.size; g++) groupStart[g + 1] = groupStart[g] + sizes[g];
  const fill = groupStart.slice(0, ids.size);
  const groupMembers = new Uint32Array(index.length);
  groupOf.forEach((g, b) => {
    groupMembers[fill[g]++] = b;
  });
  return { groupOf, groupStart, groupMembers, sizes };
}

/** The group tensors of a layout, uploaded. */
export function groupTensors(
  engine: Engine,
  layout: GroupLayout,
): { groupOf: Tensor; groupStart: Tensor; groupMembers: Tensor } {
  return {
    groupOf: engine.tensorFrom('groupOf', [layout.groupOf.length], layout.groupOf, 'u32'),
    groupStart: engine.tensorFrom('groupStart', [layout.groupStart.length], layout.groupStart, 'u32'),
    groupMembers: engine.tensorFrom('groupMembers', [layout.groupMembers.length], layout.groupMembers, 'u32'),
  };
}

/**
 * verl's grpo / rloo / opo / reinforce_plus_plus_baseline / grpo_passk / grpo_vectorized / rloo_vectorized / gpg
 * advantages [B, T] (returns = advantages).
 */
export function computeOutcomeAdvantageGpu(
  engine: Engine,
  estimator: OutcomeEstimator,
  args: {
    tokenLevelRewards: Tensor;
    responseMask: Tensor;
    groupOf: Tensor;
    groupStart: Tensor;
    groupMembers: Tensor;
    /** Scratch [2B] (row score and length) and [4] (whitening statistics). */
    rowStats: Tensor;
    stats: Tensor;
    advantages: Tensor;
    epsilon: number;
    normAdvByStd: boolean;
    B: number;
    T: number;
    /** gpg: the divisor f_norm (default 1, as verl's trainer leaves it). */
    fNorm?: number;
    /** grpo_vectorized: the floor under each group's variance (verl 1dda039b: 0; b178a3cd: epsilon). */
    varianceFloor?: number;
    /** GDPO's sum: advantages = (add ? advantages : 0) + weight·(scalar·mask); default {weight: 1, add: false}. */
    output?: { weight: number; add: boolean };
  },
): void {
  const { B, T } = args;
  expectRows(estimator, B, T);
  for (const [t, what] of [
    [args.tokenLevelRewards, 'tokenLevelRewards'],
    [args.responseMask, 'responseMask'],
    [args.advantages, 'advantages'],
  ] as const) {
    expectSize(estimator, what, t, B * T, `[B=${B}, T=${T}]`);
  }
  expectSize(estimator, 'groupOf', args.groupOf, B, `[B=${B}]`);
  expectSize(estimator, 'groupMembers', args.groupMembers, B, `[B=${B}]`);
  expectSize(estimator, 'rowStats', args.rowStats, 2 * B, `[B=${B}, 2]`);
  const dispatchArgs = {
    bindings: {
      rewards: args.tokenLevelRewards,
      mask: args.responseMask,
      groupOf: args.groupOf,
      groupStart: args.groupStart,
      groupMembers: args.groupMembers,
      rowStats: args.rowStats,
      advantages: args.advantages,
    },
    uniforms: {
      T,
      estimator: ESTIMATOR_CODES[estimator],
      epsilon: args.epsilon,
      normByStd: args.normAdvByStd ? 1 : 0,
      fNorm: args.fNorm ?? 1,
      varianceFloor: args.varianceFloor ?? 0,
      outputWeight: args.output?.weight ?? 1,
      accumulate: args.output?.add ? 1 : 0,
    },
    workgroups: [B] as [number],
  };
  engine.dispatch(outcomeRowStatsSpec, dispatchArgs);
  engine.dispatch(outcomeBroadcastSpec, dispatchArgs);
  if (estimator === 'reinforce_plus_plus_baseline') {
    maskedWhitenGpu(engine, {
      values: args.advantages,
      mask: args.responseMask,
      stats: args.stats,
      multiplyByMask: true,
    });
  }
}
