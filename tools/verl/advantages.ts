// verl's advantage estimators (core_algos.compute_*_advantage*) on plain arrays: each uploads its [B, T]
// matrices and runs the trainer's own dispatch (ppo/algorithm/advantage-estimators.ts), checks included.
// `index` is verl's uid per sequence (any value; equal values form a group).
import type { Engine } from '../../engine/index.ts';
import { computeAdvantagesGpu } from '../../ppo/algorithm/advantage-estimators.ts';
import { flatten, readMatrix, sameShape, shapeOf, upload, type Matrix } from './tensors.ts';

export interface Advantages {
  advantages: number[][];
  returns: number[][];
}

export interface OutcomeArgs {
  tokenLevelRewards: Matrix;
  responseMask: Matrix;
  index: readonly unknown[];
  epsilon?: number;
  normAdvByStdInGrpo?: boolean;
}

interface EstimatorArgs {
  tokenLevelRewards: Matrix;
  responseMask: Matrix;
  values?: Matrix;
  rewardBaselines?: readonly number[];
  index?: readonly unknown[];
  gamma?: number;
  lam?: number;
  epsilon?: number;
  normAdvByStdInGrpo?: boolean;
}

async function run(engine: Engine, estimator: string, args: EstimatorArgs): Promise<Advantages> {
  const { B, T } = shapeOf('token_level_rewards', args.tokenLevelRewards);
  sameShape('response_mask', args.responseMask, { B, T });
  if (args.values) sameShape('values', args.values, { B, T });
  if (args.rewardBaselines && args.rewardBaselines.length !== B) {
    throw new Error(`${estimator}: reward_baselines has ${args.rewardBaselines.length} entries, expected ${B}`);
  }
  const advantages = engine.tensor('advantages', [B, T]);
  const returns = engine.tensor('returns', [B, T]);
  computeAdvantagesGpu(engine, estimator, {
    tokenLevelRewards: upload(engine, 'token_level_rewards', args.tokenLevelRewards), responseMask: upload(engine, 'response_mask', args.responseMask),
    responseMaskHost: flatten(args.responseMask), advantages, returns,
    values: args.values ? upload(engine, 'values', args.values) : null,
    rewardBaselines: args.rewardBaselines ? engine.tensorFrom('reward_baselines', [B], args.rewardBaselines) : null,
    index: args.index, stats: engine.tensor('stats', [4]), rowStats: engine.tensor('row_stats', [B, 2]),
    gamma: args.gamma ?? 1, lam: args.lam ?? 1, epsilon: args.epsilon ?? 1e-6, normAdvByStd: args.normAdvByStdInGrpo ?? true, B, T,
  });
  return { advantages: await readMatrix(engine, advantages, B, T), returns: await readMatrix(engine, returns, B, T) };
}

export function computeGaeAdvantageReturn(engine: Engine, args: {
  tokenLevelRewards: Matrix; values: Matrix; responseMask: Matrix; gamma: number; lam: number;
}): Promise<Advantages> {
  return run(engine, 'gae', args);
}

/** GRPO: (score − group mean)/(group std + ε) (Dr.GRPO without the std); singleton groups use mean 0, std 1. */
export function computeGrpoOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return run(engine, 'grpo', args);
}

/** RLOO: n/(n−1)·(score − group mean), the score minus the mean of the others. */
export function computeRlooOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return run(engine, 'rloo', args);
}

/** OPO: score minus the length-weighted group mean. */
export function computeOpoOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return run(engine, 'opo', args);
}

/** REINFORCE++ with baseline: score − group mean, broadcast, masked-whitened over the batch, · mask. */
export function computeReinforcePlusPlusBaselineOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return run(engine, 'reinforce_plus_plus_baseline', args);
}

/** Pass@k GRPO: only each group's best sequence gets (best − second best)/(std + ε). */
export function computeGrpoPasskOutcomeAdvantage(engine: Engine, args: OutcomeArgs): Promise<Advantages> {
  return run(engine, 'grpo_passk', args);
}

/** REINFORCE++: discounted return-to-go reset after masked tokens, masked-whitened, · mask. */
export function computeReinforcePlusPlusOutcomeAdvantage(engine: Engine, args: { tokenLevelRewards: Matrix; responseMask: Matrix; gamma: number }): Promise<Advantages> {
  return run(engine, 'reinforce_plus_plus', args);
}

/** ReMax: masked return-to-go minus the per-sequence baseline score (rewardBaselines [B]). */
export function computeRemaxOutcomeAdvantage(engine: Engine, args: { tokenLevelRewards: Matrix; rewardBaselines: readonly number[]; responseMask: Matrix }): Promise<Advantages> {
  return run(engine, 'remax', args);
}

/** algorithm.adv_estimator dispatch, with verl's argument names (camelCase). */
export function computeAdvantage(engine: Engine, advEstimator: string, args: OutcomeArgs & {
  values?: Matrix; gamma?: number; lam?: number; rewardBaselines?: readonly number[];
}): Promise<Advantages> {
  return run(engine, advEstimator, args);
}
