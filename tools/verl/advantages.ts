// verl's advantage estimators (core_algos.compute_*_advantage*) on plain arrays, each running the kernels the
// trainer calls on its tensors (the *Gpu functions re-exported here). Inputs and outputs are [B, T] matrices;
// `index` is verl's uid per sequence (any value; equal values form a group).
import type { Engine } from '../../engine/index.ts';
import { computeGaeAdvantageReturnGpu } from '../../kernels/gae.ts';
import { computeReinforcePlusPlusOutcomeAdvantageGpu, computeRemaxOutcomeAdvantageGpu } from '../../kernels/reverse-returns.ts';
import { computeOutcomeAdvantageGpu, groupLayout, groupTensors } from '../../kernels/advantage-outcome.ts';
import type { OutcomeEstimator } from '../../kernels/ref/advantage-outcome.ts';
import { checkUnbiasedCount } from './masked-stats.ts';
import { readMatrix, sameShape, shapeOf, upload, type Matrix } from './tensors.ts';

export { computeGaeAdvantageReturnGpu, computeReinforcePlusPlusOutcomeAdvantageGpu, computeRemaxOutcomeAdvantageGpu, computeOutcomeAdvantageGpu, groupLayout, groupTensors };

export interface Advantages {
  advantages: number[][];
  returns: number[][];
}

export async function computeGaeAdvantageReturn(engine: Engine, args: {
  tokenLevelRewards: Matrix; values: Matrix; responseMask: Matrix; gamma: number; lam: number;
}): Promise<Advantages> {
  const { B, T } = shapeOf('token_level_rewards', args.tokenLevelRewards);
  sameShape('values', args.values, { B, T });
  sameShape('response_mask', args.responseMask, { B, T });
  checkUnbiasedCount(args.responseMask);
  const advantages = engine.tensor('advantages', [B, T]);
  const returns = engine.tensor('returns', [B, T]);
  computeGaeAdvantageReturnGpu(engine, {
    tokenLevelRewards: upload(engine, 'token_level_rewards', args.tokenLevelRewards), values: upload(engine, 'values', args.values),
    responseMask: upload(engine, 'response_mask', args.responseMask), advantages, returns, stats: engine.tensor('stats', [4]),
    gamma: args.gamma, lam: args.lam, B, T,
  });
  return { advantages: await readMatrix(engine, advantages, B, T), returns: await readMatrix(engine, returns, B, T) };
}

export interface OutcomeArgs {
  tokenLevelRewards: Matrix;
  responseMask: Matrix;
  index: readonly unknown[];
  epsilon?: number;
  normAdvByStdInGrpo?: boolean;
}

async function outcome(engine: Engine, estimator: OutcomeEstimator, args: OutcomeArgs): Promise<Advantages> {
  const { B, T } = shapeOf('token_level_rewards', args.tokenLevelRewards);
  sameShape('response_mask', args.responseMask, { B, T });
  if (args.index.length !== B) throw new Error(`${estimator}: index has ${args.index.length} entries, expected one per sequence (${B})`);
  const layout = groupLayout(args.index);
  if (estimator === 'grpo_passk') {
    const small = layout.sizes.findIndex((n) => n < 2);
    if (small >= 0) throw new Error(`grpo_passk: Pass@k requires at least 2 samples per group; got ${layout.sizes[small]} for group ${String(args.index[layout.groupMembers[layout.groupStart[small]]])}`);
  }
  if (estimator === 'reinforce_plus_plus_baseline') checkUnbiasedCount(args.responseMask);
  const advantages = engine.tensor('advantages', [B, T]);
  computeOutcomeAdvantageGpu(engine, estimator, {
    tokenLevelRewards: upload(engine, 'token_level_rewards', args.tokenLevelRewards), responseMask: upload(engine, 'response_mask', args.responseMask),
    ...groupTensors(engine, layout), rowStats: engine.tensor('row_stats', [B, 2]), stats: engine.tensor('stats', [4]), advantages,
    epsilon: args.epsilon ?? 1e-6, normAdvByStd: args.normAdvByStdInGrpo ?? true, B, T,
  });
  const adv = await readMatrix(engine, advantages, B, T);
  return { advantages: adv, returns: adv };
}

/** GRPO: (score − group mean)/(group std + ε) (Dr.GRPO without the std); singleton groups use mean 0, std 1. */
export function computeGrpoOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return outcome(engine, 'grpo', args);
}

/** RLOO: n/(n−1)·(score − group mean), the score minus the mean of the others. */
export function computeRlooOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return outcome(engine, 'rloo', args);
}

/** OPO: score minus the length-weighted group mean. */
export function computeOpoOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return outcome(engine, 'opo', args);
}

/** REINFORCE++ with baseline: score − group mean, broadcast, masked-whitened over the batch, · mask. */
export function computeReinforcePlusPlusBaselineOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return outcome(engine, 'reinforce_plus_plus_baseline', args);
}

/** Pass@k GRPO: only each group's best sequence gets (best − second best)/(std + ε). */
export function computeGrpoPasskOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return outcome(engine, 'grpo_passk', args);
}

/** REINFORCE++: discounted return-to-go reset after masked tokens, masked-whitened, · mask. */
export async function computeReinforcePlusPlusOutcomeAdvantage(engine: Engine, args: { tokenLevelRewards: Matrix; responseMask: Matrix; gamma: number }): Promise<Advantages> {
  const { B, T } = shapeOf('token_level_rewards', args.tokenLevelRewards);
  sameShape('response_mask', args.responseMask, { B, T });
  checkUnbiasedCount(args.responseMask);
  const advantages = engine.tensor('advantages', [B, T]);
  const returns = engine.tensor('returns', [B, T]);
  computeReinforcePlusPlusOutcomeAdvantageGpu(engine, {
    tokenLevelRewards: upload(engine, 'token_level_rewards', args.tokenLevelRewards), responseMask: upload(engine, 'response_mask', args.responseMask),
    advantages, returns, stats: engine.tensor('stats', [4]), gamma: args.gamma, B, T,
  });
  return { advantages: await readMatrix(engine, advantages, B, T), returns: await readMatrix(engine, returns, B, T) };
}

/** ReMax: masked return-to-go minus the per-sequence baseline score (rewardBaselines [B]). */
export async function computeRemaxOutcomeAdvantage(engine: Engine, args: { tokenLevelRewards: Matrix; rewardBaselines: readonly number[]; responseMask: Matrix }): Promise<Advantages> {
  const { B, T } = shapeOf('token_level_rewards', args.tokenLevelRewards);
  sameShape('response_mask', args.responseMask, { B, T });
  if (args.rewardBaselines.length !== B) throw new Error(`remax: reward_baselines has ${args.rewardBaselines.length} entries, expected ${B}`);
  const advantages = engine.tensor('advantages', [B, T]);
  const returns = engine.tensor('returns', [B, T]);
  computeRemaxOutcomeAdvantageGpu(engine, {
    tokenLevelRewards: upload(engine, 'token_level_rewards', args.tokenLevelRewards), responseMask: upload(engine, 'response_mask', args.responseMask),
    rewardBaselines: engine.tensorFrom('reward_baselines', [B], args.rewardBaselines), advantages, returns, B, T,
  });
  return { advantages: await readMatrix(engine, advantages, B, T), returns: await readMatrix(engine, returns, B, T) };
}

export const ADV_ESTIMATORS = ['gae', 'grpo', 'rloo', 'opo', 'reinforce_plus_plus', 'reinforce_plus_plus_baseline', 'remax', 'grpo_passk'] as const;

/** algorithm.adv_estimator dispatch, with verl's argument names (camelCase). */
export function computeAdvantage(engine: Engine, advEstimator: string, args: OutcomeArgs & {
  values?: Matrix; gamma?: number; lam?: number; rewardBaselines?: readonly number[];
}): Promise<Advantages> {
  const need = <V>(value: V | undefined, name: string): V => {
    if (value === undefined) throw new Error(`algorithm.adv_estimator=${advEstimator} needs ${name}`);
    return value;
  };
  switch (advEstimator) {
    case 'gae': return computeGaeAdvantageReturn(engine, { ...args, values: need(args.values, 'values'), gamma: args.gamma ?? 1, lam: args.lam ?? 1 });
    case 'grpo': return computeGrpoOutcomeAdvantage(engine, args);
    case 'rloo': return computeRlooOutcomeAdvantage(engine, args);
    case 'opo': return computeOpoOutcomeAdvantage(engine, args);
    case 'reinforce_plus_plus': return computeReinforcePlusPlusOutcomeAdvantage(engine, { ...args, gamma: args.gamma ?? 1 });
    case 'reinforce_plus_plus_baseline': return computeReinforcePlusPlusBaselineOutcomeAdvantage(engine, args);
    case 'remax': return computeRemaxOutcomeAdvantage(engine, { ...args, rewardBaselines: need(args.rewardBaselines, 'reward_baselines') });
    case 'grpo_passk': return computeGrpoPasskOutcomeAdvantage(engine, args);
    default: throw new Error(`algorithm.adv_estimator: unknown estimator "${advEstimator}" (expected one of ${ADV_ESTIMATORS.join(', ')})`);
  }
}
