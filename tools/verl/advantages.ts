// verl's advantage estimators (core_algos.compute_*_advantage*) on plain arrays: each uploads its [B, T]
// matrices and runs the trainer's own dispatch (ppo/algorithm/advantage-estimators.ts), checks included.
// `index` is verl's uid per sequence (any value; equal values form a group).
import type { Engine } from '../../engine/index.ts';
import { checkUnbiasedCount, computeAdvantagesGpu } from '../../ppo/algorithm/advantage-estimators.ts';
import { gaeSpec } from '../../kernels/ppo/gae.ts';
import { maskedWhitenGpu } from '../../kernels/ppo/masked-stats.ts';
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
  fNorm?: number;
  oldLogProbs?: Matrix;
  sumPiSquared?: Matrix;
  rolloutIsWeights?: Matrix;
  handleZeroTail?: boolean;
  reinforcePlusPlusCarriesAcrossMask?: boolean;
  grpoVectorizedVarianceFloor?: number;
  rewardKeyScores?: { scores: number[][]; weights: number[] | null } | null;
}

async function run(engine: Engine, estimator: string, args: EstimatorArgs): Promise<Advantages> {
  const { B, T } = shapeOf('token_level_rewards', args.tokenLevelRewards);
  sameShape('response_mask', args.responseMask, { B, T });
  for (const [name, m] of [
    ['values', args.values],
    ['old_log_probs', args.oldLogProbs],
    ['sum_pi_squared', args.sumPiSquared],
    ['rollout_is_weights', args.rolloutIsWeights],
  ] as const) {
    if (m) sameShape(name, m, { B, T });
  }
  if (args.rewardBaselines && args.rewardBaselines.length !== B) {
    throw new Error(`${estimator}: reward_baselines has ${args.rewardBaselines.length} entries, expected ${B}`);
  }
  const advantages = engine.tensor('advantages', [B, T]);
  const returns = engine.tensor('returns', [B, T]);
  computeAdvantagesGpu(engine, estimator, {
    tokenLevelRewards: upload(engine, 'token_level_rewards', args.tokenLevelRewards),
    responseMask: upload(engine, 'response_mask', args.responseMask),
    responseMaskHost: flatten(args.responseMask),
    advantages,
    returns,
    values: args.values ? upload(engine, 'values', args.values) : null,
    rewardBaselines: args.rewardBaselines ? engine.tensorFrom('reward_baselines', [B], args.rewardBaselines) : null,
    index: args.index,
    stats: engine.tensor('stats', [4]),
    rowStats: engine.tensor('row_stats', [B, 2]),
    gamma: args.gamma ?? 1,
    lam: args.lam ?? 1,
    epsilon: args.epsilon ?? 1e-6,
    normAdvByStd: args.normAdvByStdInGrpo ?? true,
    fNorm: args.fNorm,
    B,
    T,
    oldLogProbs: args.oldLogProbs ? upload(engine, 'old_log_probs', args.oldLogProbs) : null,
    sumPiSquared: args.sumPiSquared ? upload(engine, 'sum_pi_squared', args.sumPiSquared) : null,
    rolloutIsWeights: args.rolloutIsWeights ? upload(engine, 'rollout_is_weights', args.rolloutIsWeights) : null,
    handleZeroTail: args.handleZeroTail,
    reinforcePlusPlusCarriesAcrossMask: args.reinforcePlusPlusCarriesAcrossMask,
    grpoVectorizedVarianceFloor: args.grpoVectorizedVarianceFloor,
    rewardKeyScores: args.rewardKeyScores,
  });
  return { advantages: await readMatrix(engine, advantages, B, T), returns: await readMatrix(engine, returns, B, T) };
}

export function computeGaeAdvantageReturn(
  engine: Engine,
  args: {
    tokenLevelRewards: Matrix;
    values: Matrix;
    responseMask: Matrix;
    gamma: number;
    lam: number;
  },
): Promise<Advantages> {
  return run(engine, 'gae', args);
}

/** verl v0.2's compute_gae_advantage_return (Search-R1's too): its recursion runs through every position — v0.2 had
 *  no skipping of masked (observation) tokens, so next value and GAE carry across them — and only the whitening reads
 *  eos_mask. The scan kernel under an all-ones mask is that recursion. */
export async function computeGaeAdvantageReturnV02(
  engine: Engine,
  args: {
    tokenLevelRewards: Matrix;
    values: Matrix;
    eosMask: Matrix;
    gamma: number;
    lam: number;
  },
): Promise<Advantages> {
  const { B, T } = shapeOf('token_level_rewards', args.tokenLevelRewards);
  sameShape('values', args.values, { B, T });
  sameShape('eos_mask', args.eosMask, { B, T });
  checkUnbiasedCount(flatten(args.eosMask));
  const advantages = engine.tensor('advantages', [B, T]);
  const returns = engine.tensor('returns', [B, T]);
  engine.dispatch(gaeSpec, {
    bindings: {
      rewards: upload(engine, 'token_level_rewards', args.tokenLevelRewards),
      values: upload(engine, 'values', args.values),
      mask: engine.tensorFrom('ones', [B, T], new Float32Array(B * T).fill(1)),
      advantages,
      returns,
    },
    uniforms: { B, T, gamma: args.gamma, lam: args.lam },
    workgroups: [Math.ceil(B / 64)],
  });
  maskedWhitenGpu(engine, {
    values: advantages,
    mask: upload(engine, 'eos_mask', args.eosMask),
    stats: engine.tensor('stats', [4]),
  });
  return { advantages: await readMatrix(engine, advantages, B, T), returns: await readMatrix(engine, returns, B, T) };
}

/** algorithm.adv_estimator dispatch, with verl's argument names (camelCase). */
export function computeAdvantage(
  engine: Engine,
  advEstimator: string,
  args: OutcomeArgs & {
    values?: Matrix;
    gamma?: number;
    lam?: number;
    rewardBaselines?: readonly number[];
    fNorm?: number;
    oldLogProbs?: Matrix;
    sumPiSquared?: Matrix;
    rolloutIsWeights?: Matrix;
    handleZeroTail?: boolean;
    reinforcePlusPlusCarriesAcrossMask?: boolean;
    grpoVectorizedVarianceFloor?: number;
    rewardKeyScores?: { scores: number[][]; weights: number[] | null } | null;
  },
): Promise<Advantages> {
  return run(engine, advEstimator, args);
}
