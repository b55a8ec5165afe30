// algorithm.adv_estimator: the one dispatch from verl's estimator name to its kernel, with the checks verl's
// core_algos makes before it computes (an unbiased batch variance needs two valid tokens; pass@k needs two
// samples per group). The trainer calls it on its experience tensors; tools/verl/ calls it on uploaded arrays.
import type { Engine, Tensor } from '../../engine/index.ts';
import { computeGaeAdvantageReturnGpu } from '../../kernels/ppo/gae.ts';
import {
  computeReinforcePlusPlusOutcomeAdvantageGpu,
  computeRemaxOutcomeAdvantageGpu,
} from '../../kernels/ppo/reverse-returns.ts';
import {
  computeOutcomeAdvantageGpu,
  groupLayout,
  groupTensors,
  type GroupLayout,
} from '../../kernels/ppo/advantage-outcome.ts';
import { computeOptimalTokenBaselineGpu } from '../../kernels/ppo/optimal-token-baseline.ts';
import { zeroTailStarts } from '../../kernels/ppo/zero-tail.ts';
import type { OutcomeEstimator } from '../../kernels/ppo/ppo-vocabulary.ts';
import { maskedWhitenGpu } from '../../kernels/ppo/masked-stats.ts';
import { ADV_ESTIMATORS, type AdvEstimator } from '../config/advantage-estimator-table.ts';

/**
 * verl raises for the unbiased variance of fewer than two masked elements; so do we, in its words (the kernel would
 * give NaN).
 */
export function checkUnbiasedCount(mask: ArrayLike<number>): void {
  let count = 0;
  for (let i = 0; i < mask.length; i++) count += mask[i];
  if (count === 0) throw new Error('masked_var: At least one element in the mask has to be 1.');
  if (count === 1) throw new Error('masked_var: The sum of the mask is one, which can cause a division by zero.');
}

function checkPasskGroups(layout: GroupLayout, index: readonly unknown[]): void {
  const small = layout.sizes.findIndex((n) => n < 2);
  if (small >= 0) {
    throw new Error(
      `grpo_passk: Pass@k requires at least 2 samples per group; got ${layout.sizes[small]} for group ` +
        `${String(index[layout.groupMembers[layout.groupStart[small]]])}`,
    );
  }
}

/** tir_optimal_token_baseline's groups: verl leaves a response with no masked token out of its group, so it gets a
 *  group of its own (an id no other row has). */
function withoutEmptyRows(index: readonly unknown[], mask: ArrayLike<number>, T: number): unknown[] {
  return index.map((uid, b) => {
    for (let t = 0; t < T; t++) if (mask[b * T + t] !== 0) return uid;
    return { emptyRow: b };
  });
}

export interface AdvantageArgs {
  /** (B, T) tensors; advantages and returns are written. */
  tokenLevelRewards: Tensor;
  responseMask: Tensor;
  advantages: Tensor;
  returns: Tensor;
  /** The response mask on the host, for verl's checks (the tensor stays on the GPU). */
  responseMaskHost: ArrayLike<number>;
  /** gae: the critic's values (B, T). */
  values?: Tensor | null;
  /** remax: the greedy response's score per sequence (B). */
  rewardBaselines?: Tensor | null;
  /** Group estimators: verl's uid per sequence; equal values form a group. */
  index?: readonly unknown[];
  /** Scratch: (4) whitening statistics, (2B) row score and length. */
  stats: Tensor;
  rowStats: Tensor;
  gamma: number;
  lam: number;
  normAdvByStd: boolean;
  epsilon: number;
  B: number;
  T: number;
  /** gpg: verl's f_norm (its trainer leaves the default 1). */
  fNorm?: number;
  /** The optimal token baselines: the rollout policy's log-probs, Σ_v π_v² per token (B, T), optional IS weights. */
  oldLogProbs?: Tensor | null;
  sumPiSquared?: Tensor | null;
  rolloutIsWeights?: Tensor | null;
  /** The optimal token baselines: verl's handle_zero_tail (default true for both, verl 1dda039b's default). */
  handleZeroTail?: boolean;
  /** Older verl's forms, set only by the verl-case harness (tools/verl/verl-versions.ts): REINFORCE++ resetting the
   *  return at mask-0 tokens (b178a3cd) instead of carrying it across, grpo_vectorized's variance floor (b178a3cd:
   *  ε). */
  reinforcePlusPlusCarriesAcrossMask?: boolean;
  grpoVectorizedVarianceFloor?: number;
  /** gdpo: one score per sequence for each of algorithm.gdpo_reward_keys, and their weights (default ones); absent,
   *  GDPO normalises token_level_rewards alone, as verl without reward keys. */
  rewardKeyScores?: { scores: readonly (readonly number[])[]; weights: readonly number[] | null } | null;
}

/** What a group-outcome computation reads of the batch besides the rewards: the mask, the groups, the outputs and
 *  the normalisation. */
function outcomeBatch(a: AdvantageArgs, groups: ReturnType<typeof groupTensors>) {
  const { responseMask, rowStats, stats, advantages, epsilon, normAdvByStd, B, T } = a;
  return { responseMask, ...groups, rowStats, stats, advantages, epsilon, normAdvByStd, B, T };
}

/** verl's GDPO: each reward key's scores normalised within their groups by GRPO, summed with their weights, then
 *  whitened over the batch's response tokens (masked_whiten · mask). GRPO reads only each row's score sum, so a key's
 *  scores go to the row's first column (verl places them at its last attended response token: the same sums). */
function computeGdpoAdvantageGpu(engine: Engine, a: AdvantageArgs, layout: GroupLayout): void {
  const { B, T } = a;
  const keys = a.rewardKeyScores;
  const scoreTensors = keys
    ? keys.scores.map((scores) => {
        const placed = new Float32Array(B * T);
        scores.forEach((score, b) => {
          placed[b * T] = score;
        });
        return engine.tensorFrom('gdpo_scores', [B, T], placed);
      })
    : [a.tokenLevelRewards];
  const weights = keys?.weights ?? scoreTensors.map(() => 1);
  if (weights.length !== scoreTensors.length)
    throw new Error(
      `algorithm.gdpo_reward_weights has ${weights.length} weights for ${scoreTensors.length} gdpo_reward_keys`,
    );
  const groups = groupTensors(engine, layout);
  scoreTensors.forEach((rewards, k) => {
    computeOutcomeAdvantageGpu(engine, 'grpo', {
      ...outcomeBatch(a, groups),
      tokenLevelRewards: rewards,
      // verl's weights are float32.
      output: { weight: Math.fround(weights[k]), add: k > 0 },
    });
  });
  maskedWhitenGpu(engine, { values: a.advantages, mask: a.responseMask, stats: a.stats, multiplyByMask: true });
  engine.copy(a.advantages, a.returns);
  for (const t of [...Object.values(groups), ...(keys ? scoreTensors : [])]) engine.destroyTensor(t);
}

function need<V>(estimator: string, value: V | null | undefined, what: string): V {
  if (value === undefined || value === null) throw new Error(`algorithm.adv_estimator=${estimator} needs ${what}`);
  return value;
}

function groupIndex(estimator: string, a: AdvantageArgs): readonly unknown[] {
  const index = need(estimator, a.index, 'index (a group id per sequence)');
  if (index.length !== a.B)
    throw new Error(`${estimator}: index has ${index.length} entries, expected one per sequence (${a.B})`);
  return index;
}

/** The group-outcome estimators computeOutcomeAdvantageGpu implements; returns are their advantages. */
function outcomeAdvantage(estimator: OutcomeEstimator, engine: Engine, a: AdvantageArgs): void {
  const index = groupIndex(estimator, a);
  const layout = groupLayout(index);
  if (estimator === 'grpo_passk') checkPasskGroups(layout, index);
  if (estimator === 'reinforce_plus_plus_baseline') checkUnbiasedCount(a.responseMaskHost);
  const groups = groupTensors(engine, layout);
  computeOutcomeAdvantageGpu(engine, estimator, {
    ...outcomeBatch(a, groups),
    tokenLevelRewards: a.tokenLevelRewards,
    fNorm: a.fNorm,
    varianceFloor: a.grpoVectorizedVarianceFloor,
  });
  engine.copy(a.advantages, a.returns);
  for (const g of Object.values(groups)) engine.destroyTensor(g);
}

/** optimal_token_baseline and its multi-turn form (compact groups: a response with no masked token is alone). */
function optimalTokenBaseline(estimator: AdvEstimator, engine: Engine, a: AdvantageArgs, compact: boolean): void {
  const { B, T } = a;
  const index = groupIndex(estimator, a);
  const layout = groupLayout(compact ? withoutEmptyRows(index, a.responseMaskHost, T) : index);
  const groups = groupTensors(engine, layout);
  const tailStart = engine.tensorFrom(
    'tailStart',
    [B],
    zeroTailStarts(a.responseMaskHost, layout.groupOf, B, T, a.handleZeroTail ?? true),
    'u32',
  );
  const slotWeights = engine.tensor('slotWeights', [B, T, 2]);
  const slotBaseline = engine.tensor('slotBaseline', [B, T]);
  computeOptimalTokenBaselineGpu(engine, {
    tokenLevelRewards: a.tokenLevelRewards,
    responseMask: a.responseMask,
    oldLogProbs: need(estimator, a.oldLogProbs, 'old_log_probs'),
    sumPiSquared: need(estimator, a.sumPiSquared, 'sum_pi_squared (Σ π² per token of the rollout policy)'),
    rolloutIsWeights: a.rolloutIsWeights,
    ...groups,
    tailStart,
    slotWeights,
    slotBaseline,
    advantages: a.advantages,
    returns: a.returns,
    compact,
    epsilon: a.epsilon,
    B,
    T,
  });
  for (const t of [...Object.values(groups), tailStart, slotWeights, slotBaseline]) engine.destroyTensor(t);
}

type AdvantageCompute = (engine: Engine, a: AdvantageArgs) => void;

/**
 * Each estimator of ADV_ESTIMATOR_TABLE and the function that computes it: the dispatch is this lookup, so an
 * estimator is a table entry and an entry here, and the type makes a name without one (or one not in the table) a
 * compile error. Kept beside the kernels, not in the table, so the config layer stays free of the algorithm.
 */
export const ADVANTAGE_COMPUTE: { readonly [name in AdvEstimator]: AdvantageCompute } = {
  gae: (engine, a) => {
    checkUnbiasedCount(a.responseMaskHost);
    computeGaeAdvantageReturnGpu(engine, {
      tokenLevelRewards: a.tokenLevelRewards,
      values: need('gae', a.values, 'values (a critic)'),
      responseMask: a.responseMask,
      advantages: a.advantages,
      returns: a.returns,
      stats: a.stats,
      gamma: a.gamma,
      lam: a.lam,
      B: a.B,
      T: a.T,
    });
  },
  reinforce_plus_plus: (engine, a) => {
    checkUnbiasedCount(a.responseMaskHost);
    computeReinforcePlusPlusOutcomeAdvantageGpu(engine, {
      tokenLevelRewards: a.tokenLevelRewards,
      responseMask: a.responseMask,
      advantages: a.advantages,
      returns: a.returns,
      stats: a.stats,
      gamma: a.gamma,
      carryAcrossMask: a.reinforcePlusPlusCarriesAcrossMask,
      B: a.B,
      T: a.T,
    });
  },
  remax: (engine, a) =>
    computeRemaxOutcomeAdvantageGpu(engine, {
      tokenLevelRewards: a.tokenLevelRewards,
      responseMask: a.responseMask,
      advantages: a.advantages,
      returns: a.returns,
      rewardBaselines: need('remax', a.rewardBaselines, 'reward_baselines (the greedy baseline scores)'),
      B: a.B,
      T: a.T,
    }),
  grpo: (engine, a) => outcomeAdvantage('grpo', engine, a),
  rloo: (engine, a) => outcomeAdvantage('rloo', engine, a),
  opo: (engine, a) => outcomeAdvantage('opo', engine, a),
  reinforce_plus_plus_baseline: (engine, a) => outcomeAdvantage('reinforce_plus_plus_baseline', engine, a),
  grpo_passk: (engine, a) => outcomeAdvantage('grpo_passk', engine, a),
  grpo_vectorized: (engine, a) => outcomeAdvantage('grpo_vectorized', engine, a),
  rloo_vectorized: (engine, a) => outcomeAdvantage('rloo_vectorized', engine, a),
  gpg: (engine, a) => outcomeAdvantage('gpg', engine, a),
  gdpo: (engine, a) => {
    const index = groupIndex('gdpo', a);
    checkUnbiasedCount(a.responseMaskHost);
    computeGdpoAdvantageGpu(engine, a, groupLayout(index));
  },
  optimal_token_baseline: (engine, a) => optimalTokenBaseline('optimal_token_baseline', engine, a, false),
  tir_optimal_token_baseline: (engine, a) => optimalTokenBaseline('tir_optimal_token_baseline', engine, a, true),
};

/** Advantages and returns [B, T] for `estimator`; the outcome estimators' returns are their advantages. */
export function computeAdvantagesGpu(engine: Engine, estimator: string, a: AdvantageArgs): void {
  if (!Object.hasOwn(ADVANTAGE_COMPUTE, estimator))
    throw new Error(
      `algorithm.adv_estimator: unknown estimator "${estimator}" (expected one of ${ADV_ESTIMATORS.join(', ')})`,
    );
  ADVANTAGE_COMPUTE[estimator as AdvEstimator](engine, a);
}
