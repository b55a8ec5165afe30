// verl's advantage estimators (core_algos' @register_adv_est, algorithm.adv_estimator) declared as data, one entry
// per estimator: from this table follow the config's choices and --help, whether a run needs a critic, ReMax's
// greedy baseline, Σπ² and the verl-case harness's function names. The math is the estimator's entry of
// ADVANTAGE_COMPUTE (ppo/algorithm/advantage-estimators.ts, keyed by these names) and its kernel's reference. A leaf:
// imports nothing.

export interface AdvEstimatorSpec {
  name: string;
  /** The verl function that computes it. */
  verlFunction: string;
  /** One line for --help and the docs. */
  help: string;
  /** A critic's values (GAE). */
  critic?: boolean;
  /** A greedy response's score per prompt (ReMax's baseline, an extra generation). */
  rewardBaselines?: boolean;
  /** Σ_v π_v² per token of the rollout policy, and rollout_is_weights when there are some. */
  sumPiSquared?: boolean;
}

export const ADV_ESTIMATOR_TABLE = [
  { name: 'gae', verlFunction: 'compute_gae_advantage_return', help: 'GAE with a critic', critic: true },
  { name: 'grpo', verlFunction: 'compute_grpo_outcome_advantage', help: 'group-normalised outcome' },
  { name: 'rloo', verlFunction: 'compute_rloo_outcome_advantage', help: 'leave-one-out group baseline' },
  { name: 'opo', verlFunction: 'compute_opo_outcome_advantage', help: 'length-weighted group baseline' },
  {
    name: 'reinforce_plus_plus',
    verlFunction: 'compute_reinforce_plus_plus_outcome_advantage',
    help: 'discounted return-to-go, whitened (carried across mask-0 spans)',
  },
  {
    name: 'reinforce_plus_plus_baseline',
    verlFunction: 'compute_reinforce_plus_plus_baseline_outcome_advantage',
    help: 'group mean baseline, whitened',
  },
  {
    name: 'remax',
    verlFunction: 'compute_remax_outcome_advantage',
    help: 'a greedy response as baseline',
    rewardBaselines: true,
  },
  { name: 'grpo_passk', verlFunction: 'compute_grpo_passk_outcome_advantage', help: 'pass@k: only the best' },
  {
    name: 'grpo_vectorized',
    verlFunction: 'compute_grpo_vectorized_outcome_advantage',
    help: 'grpo, vectorised (no variance floor)',
  },
  {
    name: 'rloo_vectorized',
    verlFunction: 'compute_rloo_vectorized_outcome_advantage',
    help: 'rloo, 0 for a one-member group',
  },
  { name: 'gpg', verlFunction: 'compute_gpg_outcome_advantage', help: 'GPG: group baseline rescaled' },
  {
    name: 'optimal_token_baseline',
    verlFunction: 'compute_optimal_token_baseline_advantage',
    help: 'per-token variance-optimal baseline',
    sumPiSquared: true,
  },
  {
    name: 'tir_optimal_token_baseline',
    verlFunction: 'compute_multi_turn_optimal_token_baseline_advantage',
    help: 'its multi-turn form',
    sumPiSquared: true,
  },
  {
    name: 'gdpo',
    verlFunction: 'compute_gdpo_outcome_advantage',
    help: 'GRPO per reward key (gdpo_reward_keys), weighted, whitened',
  },
] as const satisfies readonly AdvEstimatorSpec[];

export type AdvEstimator = (typeof ADV_ESTIMATOR_TABLE)[number]['name'];

export const ADV_ESTIMATORS: readonly AdvEstimator[] = ADV_ESTIMATOR_TABLE.map((e) => e.name);

export function advEstimatorSpec(name: string): AdvEstimatorSpec | undefined {
  return (ADV_ESTIMATOR_TABLE as readonly AdvEstimatorSpec[]).find((e) => e.name === name);
}

/** The estimators verl's compute_advantage hands sum_pi_squared and rollout_is_weights: the optimal token baselines. */
export const SUM_PI_SQUARED_ESTIMATORS: readonly string[] = ADV_ESTIMATOR_TABLE.filter(
  (e: AdvEstimatorSpec) => e.sumPiSquared,
).map((e) => e.name);

/** Whether the estimator trains with a critic (verl: only GAE uses one). */
export function estimatorUsesCritic(name: string): boolean {
  return advEstimatorSpec(name)?.critic === true;
}

/** "gae (…), grpo (…), …" for --help. */
export function advEstimatorsHelp(): string {
  return ADV_ESTIMATOR_TABLE.map((e) => `${e.name} (${e.help})`).join('; ');
}
