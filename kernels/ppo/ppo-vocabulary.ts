// The names the PPO kernels, their CPU references and the trainer's config share (verl's spellings): loss
// aggregation modes, KL estimators, outcome estimators, the policy-loss settings. A leaf: it imports nothing, so
// kernels/<family>/<op>.ref.ts and the launchers can both use it without either depending on the other (it
// re-exports the policy-loss table, another leaf).

export const LOSS_AGG_MODES = [
  'token-mean',
  'seq-mean-token-sum',
  'seq-mean-token-mean',
  'seq-mean-token-sum-norm',
  'token-sum',
] as const;
export type LossAggMode = (typeof LOSS_AGG_MODES)[number];

export interface LossAggregation {
  mode: LossAggMode;
  /** token-mean: valid tokens of the whole (global) mini-batch. */
  batchNumTokens: number;
  /** seq-mean-*: sequences of the whole (global) mini-batch (verl's trainer: all its rows; alone: the non-empty
   *  ones). */
  globalBatchSize: number;
  /** seq-mean-token-sum-norm: a further constant divisor (verl default: the response length). */
  lossScaleFactor: number;
  dpSize: number;
}

export function checkLossAggMode(mode: string): LossAggMode {
  if (!(LOSS_AGG_MODES as readonly string[]).includes(mode)) {
    throw new Error(`Invalid loss_agg_mode: ${mode} (expected one of ${LOSS_AGG_MODES.join(', ')})`);
  }
  return mode as LossAggMode;
}

export const KL_ESTIMATORS = ['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3'] as const;

export interface KlEstimator {
  /** 0 = k1, 1 = abs, 2 = k2, 3 = k3 (the codes the WGSL uses). */
  code: number;
  /** verl's "k3+"-style suffix: forward value of the estimator, gradient of k2 (straight-through). */
  straightThrough: boolean;
}

export function parseKlEstimator(name: string): KlEstimator {
  const straightThrough = name.endsWith('+');
  const base = straightThrough ? name.slice(0, -1) : name;
  const code = ({ kl: 0, k1: 0, abs: 1, mse: 2, k2: 2, low_var_kl: 3, k3: 3 } as Record<string, number>)[base];
  if (code === undefined) {
    throw new Error(
      `kl_penalty: unsupported estimator "${name}"; expected one of ${KL_ESTIMATORS.join(', ')} ` +
        `(optionally with a "+" suffix for a k2 straight-through gradient); "full" needs full-vocabulary log-probs ` +
        `and is not implemented`,
    );
  }
  return { code, straightThrough: straightThrough && code !== 2 };
}

export const OUTCOME_ESTIMATORS = [
  'grpo',
  'rloo',
  'opo',
  'reinforce_plus_plus_baseline',
  'grpo_passk',
  'grpo_vectorized',
  'rloo_vectorized',
  'gpg',
] as const;
export type OutcomeEstimator = (typeof OUTCOME_ESTIMATORS)[number];

/** actor.policy_loss.loss_mode values: verl's registered policy losses, declared in policy-loss-modes.ts. */
export { POLICY_LOSS_MODES, type PolicyLossMode } from './policy-loss-modes.ts';
import type { PolicyLossMode } from './policy-loss-modes.ts';

export interface PolicyLossConfig {
  lossMode: PolicyLossMode;
  clipRatioLow: number;
  clipRatioHigh: number;
  clipRatioC: number;
  /** sapo: gate temperatures for A > 0 and A ≤ 0 (actor.tau_pos, actor.tau_neg; verl 1.0 and 1.05). */
  tauPos?: number;
  tauNeg?: number;
  /**
   * clip_cov: fraction of tokens whose loss is cut (policy_loss.clip_cov_ratio, 0.0002) among those with covariance in
   * (lb, ub).
   */
  clipCovRatio?: number;
  clipCovLb?: number;
  clipCovUb?: number;
  /**
   * kl_cov: fraction of tokens (the largest covariances) that get ppo_kl_coef·|log-ratio| (policy_loss.kl_cov_ratio,
   * ppo_kl_coef).
   */
  klCovRatio?: number;
  ppoKlCoef?: number;
  /** dro: the weight β of the quadratic log-ratio penalty β/2·(log π − log π_old)² (policy_loss.dro_beta). */
  droBeta?: number;
}
