// The parameters of the verl functions tools/verl-case.ts answers, per verl version (tools/verl/verl-versions.ts):
// verl-project/verl 1dda039b (`verl_1dda039b`), volcengine/verl b178a3cd (the `head` profile) and v0.2.0.post2
// (fb532783, `legacy_v020`; Search-R1's fork a14dc3a, `search_r1`, keeps v0.2's core_algos without reinforce++ and
// remax). A case whose keyword arguments a signature does not take is refused with Python's TypeError words, as
// verl's call was; functions that end in **kwargs take any.
import { VERL_VERSIONS, type VerlVersion } from './verl-versions.ts';

export type { VerlVersion };

interface Signature {
  params: readonly string[];
  /** The function ends in **kwargs: unknown keyword arguments are accepted and ignored. */
  varkw?: boolean;
}

const OUTCOME = ['token_level_rewards', 'response_mask', 'index', 'epsilon'];
const POLICY = [
  'old_log_prob',
  'log_prob',
  'advantages',
  'response_mask',
  'loss_agg_mode',
  'config',
  'rollout_is_weights',
];
const POLICY_MODES_B178A3CD = [
  'vanilla',
  'gspo',
  'sapo',
  'gpg',
  'clip_cov',
  'kl_cov',
  'geo_mean',
  'cispo',
  'bypass_mode',
];
const OPTIMAL_TOKEN_BASELINE = [
  'token_level_rewards',
  'response_mask',
  'index',
  'old_log_probs',
  'sum_pi_squared',
  'rollout_is_weights',
  'handle_zero_tail',
  'epsilon',
];
const MASKED_STATS = { params: ['values', 'mask', 'axis', 'unbiased', 'shift_mean'] };

const B178A3CD: Record<string, Signature> = {
  compute_gae_advantage_return: { params: ['token_level_rewards', 'values', 'response_mask', 'gamma', 'lam'] },
  compute_grpo_outcome_advantage: { params: [...OUTCOME, 'norm_adv_by_std_in_grpo', 'config'] },
  compute_grpo_vectorized_outcome_advantage: { params: [...OUTCOME, 'norm_adv_by_std_in_grpo', 'config'] },
  compute_grpo_passk_outcome_advantage: { params: [...OUTCOME, 'norm_adv_by_std_in_grpo', 'config'], varkw: true },
  compute_reinforce_plus_plus_baseline_outcome_advantage: { params: [...OUTCOME, 'config'], varkw: true },
  compute_rloo_outcome_advantage: { params: [...OUTCOME, 'config'], varkw: true },
  compute_opo_outcome_advantage: { params: [...OUTCOME, 'config'], varkw: true },
  compute_rloo_vectorized_outcome_advantage: { params: [...OUTCOME, 'config'], varkw: true },
  compute_gpg_outcome_advantage: { params: [...OUTCOME, 'f_norm', 'alpha', 'config'], varkw: true },
  compute_reinforce_plus_plus_outcome_advantage: {
    params: ['token_level_rewards', 'response_mask', 'config'],
    varkw: true,
  },
  compute_remax_outcome_advantage: {
    params: ['token_level_rewards', 'reward_baselines', 'response_mask', 'config'],
    varkw: true,
  },
  compute_optimal_token_baseline_advantage: { params: OPTIMAL_TOKEN_BASELINE },
  compute_multi_turn_optimal_token_baseline_advantage: { params: OPTIMAL_TOKEN_BASELINE },
  compute_pf_ppo_reweight_data: { params: ['data', 'reweight_method', 'weight_pow'] },
  compute_rewards: { params: ['token_level_scores', 'old_log_prob', 'ref_log_prob', 'kl_ratio'] },
  agg_loss: {
    params: [
      'loss_mat',
      'loss_mask',
      'loss_agg_mode',
      'dp_size',
      'batch_num_tokens',
      'global_batch_size',
      'loss_scale_factor',
    ],
  },
  compute_policy_loss: {
    params: [
      'old_log_prob',
      'log_prob',
      'advantages',
      'response_mask',
      'cliprange',
      'cliprange_low',
      'cliprange_high',
      'clip_ratio_c',
      'loss_agg_mode',
    ],
  },
  ...Object.fromEntries(POLICY_MODES_B178A3CD.map((mode) => [`compute_policy_loss_${mode}`, { params: POLICY }])),
  get_policy_loss_fn: { params: ['name', 'loss_mode', ...POLICY] },
  compute_policy_loss_reinforce: { params: ['rollout_log_prob', ...POLICY.slice(1)] },
  compute_entropy_loss: { params: ['logits', 'response_mask', 'loss_agg_mode'] },
  compute_value_loss: { params: ['vpreds', 'returns', 'values', 'response_mask', 'cliprange_value', 'loss_agg_mode'] },
  kl_penalty: { params: ['logprob', 'ref_logprob', 'kl_penalty'] },
  kl_penalty_forward: { params: ['logprob', 'ref_logprob', 'kl_penalty'] },
  get_kl_controller: { params: ['kl_ctrl'] },
  masked_stats: MASKED_STATS,
  entropy_from_logits_with_chunking: { params: ['logits', 'chunk_size'] },
  compute_rollout_correction_weights: {
    params: ['log_ratio', 'response_mask', 'rollout_is', 'rollout_is_threshold', 'rollout_is_batch_normalize'],
  },
  compute_rollout_rejection_mask: { params: ['log_ratio', 'response_mask', 'rollout_rs', 'rollout_rs_threshold'] },
  compute_offpolicy_metrics: { params: ['old_log_prob', 'rollout_log_prob', 'response_mask'] },
  compute_rollout_correction_and_rejection_mask: {
    params: [
      'old_log_prob',
      'rollout_log_prob',
      'response_mask',
      'rollout_is',
      'rollout_is_threshold',
      'rollout_is_batch_normalize',
      'rollout_rs',
      'rollout_rs_threshold',
    ],
  },
  compute_rollout_corr_metrics_from_logprobs: { params: ['log_prob', 'rollout_log_prob', 'response_mask'] },
};

/** verl-project 1dda039b: the value loss takes agg_loss's global normalisers, the optimal token baselines end in
 *  **kwargs, and the new policy losses and GDPO. */
const V1DDA039B: Record<string, Signature> = {
  ...B178A3CD,
  compute_value_loss: {
    params: [...B178A3CD.compute_value_loss.params, ...B178A3CD.agg_loss.params.slice(3)],
  },
  compute_optimal_token_baseline_advantage: { params: OPTIMAL_TOKEN_BASELINE, varkw: true },
  compute_multi_turn_optimal_token_baseline_advantage: { params: OPTIMAL_TOKEN_BASELINE, varkw: true },
  compute_gdpo_outcome_advantage: {
    params: [...OUTCOME, 'norm_adv_by_std_in_grpo', 'config', 'non_tensor_batch', 'batch'],
    varkw: true,
  },
  ...Object.fromEntries(
    VERL_VERSIONS['1dda039b'].newPolicyLosses.map((mode) => [`compute_policy_loss_${mode}`, { params: POLICY }]),
  ),
};

const EOS = (params: string[]) => ({ params: params.map((p) => (p === 'response_mask' ? 'eos_mask' : p)) });

const V02: Record<string, Signature> = {
  compute_gae_advantage_return: EOS(B178A3CD.compute_gae_advantage_return.params as string[]),
  compute_grpo_outcome_advantage: EOS(OUTCOME),
  compute_reinforce_plus_plus_outcome_advantage: { params: ['token_level_rewards', 'eos_mask', 'gamma'] },
  compute_remax_outcome_advantage: { params: ['token_level_rewards', 'reward_baselines', 'eos_mask'] },
  compute_rewards: B178A3CD.compute_rewards,
  compute_policy_loss: { params: ['old_log_prob', 'log_prob', 'advantages', 'eos_mask', 'cliprange'] },
  compute_entropy_loss: { params: ['logits', 'eos_mask'] },
  compute_value_loss: { params: ['vpreds', 'returns', 'values', 'eos_mask', 'cliprange_value'] },
  kl_penalty: B178A3CD.kl_penalty,
  get_kl_controller: { params: ['config'] },
  masked_stats: MASKED_STATS,
};

const SIGNATURES: Record<VerlVersion, Record<string, Signature>> = {
  v02: V02,
  b178a3cd: B178A3CD,
  '1dda039b': V1DDA039B,
};

/** v0.2 core_algos functions Search-R1's fork dropped. */
const NOT_IN_SEARCH_R1 = ['compute_reinforce_plus_plus_outcome_advantage', 'compute_remax_outcome_advantage'];

/** Refuses a core_algos function the version lacks and keyword arguments its signature does not take. `name` is the
 *  function's own name (masked_stats for torch_functional's masked_*); names outside the table pass unchecked. */
export function checkVerlSignature(
  name: string,
  version: VerlVersion,
  kwargs: Record<string, unknown>,
  options: { module: string; searchR1?: boolean },
): void {
  const table = SIGNATURES[version];
  const signature = table[name];
  if (!signature) {
    const later = Object.values(SIGNATURES).some((other) => name in other);
    if (options.module === 'core_algos' && later) {
      throw new Error(
        `module 'verl.trainer.ppo.core_algos' has no attribute '${name}' (verl ${VERL_VERSIONS[version].label} ` +
          `has no ${name})`,
      );
    }
    return;
  }
  if (options.searchR1 && NOT_IN_SEARCH_R1.includes(name)) {
    throw new Error(`module 'verl.trainer.ppo.core_algos' has no attribute '${name}' (Search-R1's fork dropped it)`);
  }
  if (signature.varkw) return;
  for (const key of Object.keys(kwargs)) {
    const parameter = key.split('.')[0];
    if (!signature.params.includes(parameter)) {
      throw new Error(
        `${name}() got an unexpected keyword argument '${parameter}' (verl ${VERL_VERSIONS[version].label} ` +
          `takes ${signature.params.join(', ')})`,
      );
    }
  }
}
