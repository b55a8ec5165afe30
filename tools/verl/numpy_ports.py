"""numpy (float64) ports of verl's PPO math, line for line, for the goldens of test/webgpu/verl-case-routes.test.ts.

Ported from verl main b178a3cd: verl/trainer/ppo/core_algos.py (agg_loss, the deprecated compute_policy_loss, the
registered policy losses with rollout_is_weights, compute_gae_advantage_return,
compute_reinforce_plus_plus_outcome_advantage, compute_grpo_passk_outcome_advantage) and
verl/utils/torch_functional.py (masked_sum, masked_mean, masked_var, masked_whiten). Each function keeps verl's name,
arguments and order of operations; torch calls become their numpy equivalents (torch.clamp -> np.clip,
torch.maximum -> np.maximum, torch.where -> np.where).

verl's .detach() terms take `frozen`, the log-probs at which the gradient is evaluated: tools/verl/goldens.py
differentiates a loss by central differences in `log_prob` with `frozen` held fixed, which is what autograd computes
for verl's graph.
"""

import numpy as np


# verl/utils/torch_functional.py


def masked_sum(values, mask, axis=None):
    valid_values = np.where(mask.astype(bool), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def masked_var(values, mask, unbiased=True):
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        if mask_sum == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(values, mask, shift_mean=True):
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) / np.sqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


# verl/trainer/ppo/core_algos.py


def agg_loss(loss_mat, loss_mask, loss_agg_mode, dp_size=1, batch_num_tokens=None, global_batch_size=None,
             loss_scale_factor=None):
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            batch_num_tokens = loss_mask.sum()
        loss = masked_sum(loss_mat, loss_mask) / batch_num_tokens * dp_size
    elif loss_agg_mode == "seq-mean-token-sum":
        seq_losses = np.sum(loss_mat * loss_mask, axis=-1)
        seq_mask = (np.sum(loss_mask, axis=-1) > 0).astype(np.float64)
        if global_batch_size is None:
            global_batch_size = seq_mask.sum()
        loss = masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
    elif loss_agg_mode == "seq-mean-token-mean":
        seq_mask = np.sum(loss_mask, axis=-1)
        seq_losses = np.sum(loss_mat * loss_mask, axis=-1) / (seq_mask + 1e-8)
        seq_mask = (seq_mask > 0).astype(np.float64)
        if global_batch_size is None:
            global_batch_size = seq_mask.sum()
        loss = masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
    elif loss_agg_mode == "seq-mean-token-sum-norm":
        seq_losses = np.sum(loss_mat * loss_mask, axis=-1)
        if loss_scale_factor is None:
            loss_scale_factor = loss_mask.shape[-1]
        loss = np.sum(seq_losses) / loss_scale_factor
    else:
        raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")
    return loss


def compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, cliprange=None, cliprange_low=None,
                        cliprange_high=None, clip_ratio_c=3.0, loss_agg_mode="token-mean"):
    """The deprecated form (4 outputs); the same math as compute_policy_loss_vanilla without weights."""
    assert clip_ratio_c > 1.0
    negative_approx_kl = log_prob - old_log_prob
    negative_approx_kl = np.clip(negative_approx_kl, -20.0, 20.0)
    ratio = np.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    if cliprange_low is None:
        cliprange_low = cliprange
    if cliprange_high is None:
        cliprange_high = cliprange
    pg_losses2 = -advantages * np.clip(ratio, 1 - cliprange_low, 1 + cliprange_high)
    clip_pg_losses1 = np.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean((pg_losses2 > pg_losses1).astype(np.float64), response_mask)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = np.minimum(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = masked_mean((clip_pg_losses1 > pg_losses3) * (advantages < 0).astype(np.float64),
                                    response_mask)
    pg_losses = np.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower


class ActorConfig:
    """The actor config keys the policy losses read (verl's defaults; global_batch_info empty: local counts)."""

    def __init__(self, clip_ratio=0.2, clip_ratio_low=None, clip_ratio_high=None, clip_ratio_c=3.0, tau_pos=1.0,
                 tau_neg=1.05, clip_cov_ratio=0.0002, clip_cov_lb=1.0, clip_cov_ub=5.0, kl_cov_ratio=0.0002,
                 ppo_kl_coef=0.1):
        self.clip_ratio = clip_ratio
        self.clip_ratio_low = clip_ratio_low
        self.clip_ratio_high = clip_ratio_high
        self.clip_ratio_c = clip_ratio_c
        self.tau_pos = tau_pos
        self.tau_neg = tau_neg
        self.clip_cov_ratio = clip_cov_ratio
        self.clip_cov_lb = clip_cov_lb
        self.clip_cov_ub = clip_cov_ub
        self.kl_cov_ratio = kl_cov_ratio
        self.ppo_kl_coef = ppo_kl_coef
        self.global_batch_info = {}

    def low(self):
        return self.clip_ratio_low if self.clip_ratio_low is not None else self.clip_ratio

    def high(self):
        return self.clip_ratio_high if self.clip_ratio_high is not None else self.clip_ratio


def compute_policy_loss_vanilla(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode="token-mean",
                                config=None, rollout_is_weights=None):
    cliprange_low, cliprange_high, clip_ratio_c = config.low(), config.high(), config.clip_ratio_c
    assert clip_ratio_c > 1.0
    negative_approx_kl = np.clip(log_prob - old_log_prob, -20.0, 20.0)
    ratio = np.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * np.clip(ratio, 1 - cliprange_low, 1 + cliprange_high)
    clip_pg_losses1 = np.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean((pg_losses2 > pg_losses1).astype(np.float64), response_mask)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = np.minimum(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = masked_mean((clip_pg_losses1 > pg_losses3) * (advantages < 0).astype(np.float64),
                                    response_mask)
    pg_losses = np.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info)
    return pg_loss, {
        "actor/pg_clipfrac": pg_clipfrac,
        "actor/ppo_kl": ppo_kl,
        "actor/pg_clipfrac_lower": pg_clipfrac_lower,
    }


def compute_policy_loss_gspo(old_log_prob, log_prob, advantages, response_mask, frozen,
                             loss_agg_mode="seq-mean-token-mean", config=None, rollout_is_weights=None):
    clip_ratio_low, clip_ratio_high = config.low(), config.high()
    negative_approx_kl = log_prob - old_log_prob
    seq_lengths = np.maximum(np.sum(response_mask, axis=-1), 1)
    # negative_approx_kl_seq.detach(): the sequence term at the frozen log-probs.
    negative_approx_kl_seq_sg = np.sum((frozen - old_log_prob) * response_mask, axis=-1) / seq_lengths
    log_seq_importance_ratio = log_prob - frozen + negative_approx_kl_seq_sg[:, None]
    log_seq_importance_ratio = np.minimum(log_seq_importance_ratio, 10.0)
    seq_importance_ratio = np.exp(log_seq_importance_ratio)
    pg_losses1 = -advantages * seq_importance_ratio
    pg_losses2 = -advantages * np.clip(seq_importance_ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    pg_losses = np.maximum(pg_losses1, pg_losses2)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, "seq-mean-token-mean", **config.global_batch_info)
    pg_clipfrac = masked_mean((pg_losses2 > pg_losses1).astype(np.float64), response_mask)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    return pg_loss, {"actor/pg_clipfrac": pg_clipfrac, "actor/ppo_kl": ppo_kl, "actor/pg_clipfrac_lower": 0.0}


def compute_policy_loss_sapo(old_log_prob, log_prob, advantages, response_mask, frozen,
                             loss_agg_mode="seq-mean-token-mean", config=None, rollout_is_weights=None):
    def gate_function(x, tau):
        return 1.0 / (1.0 + np.exp(-(tau * (x - 1.0)))) * (4.0 / tau)

    negative_approx_kl = np.clip(log_prob - old_log_prob, -20.0, 20.0)
    ratio = np.exp(negative_approx_kl)
    taus = np.where(advantages > 0, config.tau_pos, config.tau_neg)
    gates = gate_function(ratio, taus)
    pg_losses = -gates * advantages
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, "seq-mean-token-mean", **config.global_batch_info)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    return pg_loss, {"actor/pg_clipfrac": 0.0, "actor/ppo_kl": ppo_kl, "actor/pg_clipfrac_lower": 0.0}


def compute_policy_loss_gpg(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode="token-mean",
                            config=None, rollout_is_weights=None):
    pg_losses = -log_prob * advantages
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    return agg_loss(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info), {}


def compute_policy_loss_clip_cov(old_log_prob, log_prob, advantages, response_mask, frozen,
                                 loss_agg_mode="token-mean", config=None, rollout_is_weights=None):
    clip_cov_ratio, clip_cov_lb, clip_cov_ub = config.clip_cov_ratio, config.clip_cov_lb, config.clip_cov_ub
    cliprange_low, cliprange_high = config.low(), config.high()
    assert clip_cov_ratio > 0, "clip_ratio should be larger than 0."
    negative_approx_kl = log_prob - old_log_prob
    ratio = np.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    corr = np.ones_like(advantages)
    pg_losses2 = -advantages * np.clip(ratio, 1 - cliprange_low, 1 + cliprange_high)
    # The token pick is an index, constant under the gradient: made at the frozen log-probs.
    ratio_sg = np.exp(frozen - old_log_prob)
    clipped_sg = -advantages * np.clip(ratio_sg, 1 - cliprange_low, 1 + cliprange_high) > -advantages * ratio_sg
    clip_by_origin = clipped_sg & (response_mask > 0)
    cov_all = (advantages - masked_mean(advantages, response_mask)) * (frozen - masked_mean(frozen, response_mask))
    cov_all[response_mask == 0] = -np.inf
    cov_all[clip_by_origin] = -np.inf
    clip_num = max(int(clip_cov_ratio * response_mask.sum()), 1)
    top_k_idx = np.argwhere((cov_all < clip_cov_ub) & (cov_all > clip_cov_lb) & (response_mask > 0))
    # verl draws torch.randperm here; the goldens' settings keep every candidate (clip_num >= candidates).
    assert len(top_k_idx) <= clip_num, "a random draw would decide the pick"
    corr[top_k_idx[:, 0], top_k_idx[:, 1]] = 0
    pg_clipfrac = masked_mean((corr == 0).astype(np.float64), response_mask)
    pg_losses = np.maximum(pg_losses1, pg_losses2) * corr
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info)
    return pg_loss, {"actor/pg_clipfrac": pg_clipfrac, "actor/ppo_kl": ppo_kl}


def compute_policy_loss_kl_cov(old_log_prob, log_prob, advantages, response_mask, frozen,
                               loss_agg_mode="token-mean", config=None, rollout_is_weights=None):
    kl_cov_ratio, ppo_kl_coef = config.kl_cov_ratio, config.ppo_kl_coef
    assert kl_cov_ratio > 0, "kl_cov_ratio should be larger than 0."
    negative_approx_kl = log_prob - old_log_prob
    abs_kl = np.abs(negative_approx_kl)
    ratio = np.exp(negative_approx_kl)
    ppo_kl_abs = masked_mean(np.abs(negative_approx_kl), response_mask)
    pg_losses1 = -advantages * ratio
    pg_losses_kl = -advantages * ratio + ppo_kl_coef * abs_kl
    pg_losses = pg_losses1.copy()
    all_valid = response_mask > 0
    all_valid_idx = np.nonzero(all_valid.reshape(-1))[0]
    all_valid_adv = advantages[all_valid].reshape(-1)
    all_valid_logp = frozen[all_valid].reshape(-1)
    k = min(kl_cov_ratio, len(all_valid_adv))
    if k != 0:
        cov_lst_all = (all_valid_adv - all_valid_adv.mean()) * (all_valid_logp - all_valid_logp.mean())
        k_percent_nums = max(1, int(len(cov_lst_all) * kl_cov_ratio))
        large_cov_idxs = np.argsort(-cov_lst_all, kind="stable")[:k_percent_nums]
        if len(large_cov_idxs) != 0:
            large_cov_idxs = all_valid_idx[large_cov_idxs]
            rows, cols = large_cov_idxs // advantages.shape[1], large_cov_idxs % advantages.shape[1]
            pg_losses[rows, cols] = pg_losses_kl[rows, cols]
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info)
    return pg_loss, {"actor/ppo_kl": ppo_kl_abs}


def compute_policy_loss_geo_mean(old_log_prob, log_prob, advantages, response_mask, frozen,
                                 loss_agg_mode="token-mean", config=None, rollout_is_weights=None):
    cliprange_low, cliprange_high = config.low(), config.high()
    negative_approx_kl = log_prob - old_log_prob
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    sgn_advantage = np.sign(advantages)
    negative_approx_kl_clamp = np.clip(negative_approx_kl, -cliprange_low, cliprange_high)
    negative_approx_kl_min = np.minimum(sgn_advantage * negative_approx_kl, sgn_advantage * negative_approx_kl_clamp)
    negative_approx_kl_min = sgn_advantage * negative_approx_kl_min
    response_mask_sum = response_mask.sum(axis=-1)
    ratio = np.exp((negative_approx_kl_min * response_mask).sum(axis=-1) / (response_mask_sum + 1e-8))
    advantage = (advantages * response_mask).sum(axis=-1) / (response_mask_sum + 1e-8)
    pg_losses = -advantage * ratio
    if rollout_is_weights is not None:
        seq_is_weights = np.exp(
            (np.log(rollout_is_weights + 1e-10) * response_mask).sum(axis=-1) / (response_mask_sum + 1e-8))
        pg_losses = pg_losses * seq_is_weights
    pg_loss = np.mean(pg_losses)
    clipped = negative_approx_kl != negative_approx_kl_clamp
    pg_clipfrac = masked_mean((clipped * (advantages > 0)).astype(np.float64), response_mask)
    pg_clipfrac_lower = masked_mean((clipped * (advantages < 0)).astype(np.float64), response_mask)
    return pg_loss, {
        "actor/pg_clipfrac": pg_clipfrac,
        "actor/ppo_kl": ppo_kl,
        "actor/pg_clipfrac_lower": pg_clipfrac_lower,
    }


def compute_policy_loss_cispo(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode="token-mean",
                              config=None, rollout_is_weights=None):
    clip_ratio_low, clip_ratio_high = config.low(), config.high()
    negative_approx_kl = np.clip(log_prob - old_log_prob, -20.0, 20.0)
    ratio = np.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    clipped_ratio = np.clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    # clipped_ratio.detach(): at the frozen log-probs.
    clipped_ratio_sg = np.clip(np.exp(np.clip(frozen - old_log_prob, -20.0, 20.0)), 1 - clip_ratio_low,
                               1 + clip_ratio_high)
    pg_losses = -clipped_ratio_sg * advantages * log_prob
    pg_clipfrac = masked_mean((ratio != clipped_ratio).astype(np.float64), response_mask)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info)
    return pg_loss, {"actor/pg_clipfrac": pg_clipfrac, "actor/ppo_kl": ppo_kl, "actor/pg_clipfrac_lower": 0.0}


POLICY_LOSSES = {
    "vanilla": compute_policy_loss_vanilla,
    "gspo": compute_policy_loss_gspo,
    "sapo": compute_policy_loss_sapo,
    "gpg": compute_policy_loss_gpg,
    "clip_cov": compute_policy_loss_clip_cov,
    "kl_cov": compute_policy_loss_kl_cov,
    "geo_mean": compute_policy_loss_geo_mean,
    "cispo": compute_policy_loss_cispo,
}


def compute_gae_advantage_return(token_level_rewards, values, response_mask, gamma, lam):
    """verl main: observation tokens (mask 0) are skipped, carrying the next value and GAE across them."""
    nextvalues = 0
    lastgaelam = 0
    advantages_reversed = []
    gen_len = token_level_rewards.shape[-1]
    for t in reversed(range(gen_len)):
        delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = np.stack(advantages_reversed[::-1], axis=1)
    returns = advantages + values
    advantages = masked_whiten(advantages, response_mask)
    return advantages, returns


def compute_reinforce_plus_plus_outcome_advantage(token_level_rewards, response_mask, gamma):
    """verl main reads config.gamma; v0.2 takes gamma: the same math."""
    returns = np.zeros_like(token_level_rewards)
    running_return = 0
    for t in reversed(range(token_level_rewards.shape[1])):
        running_return = token_level_rewards[:, t] + gamma * running_return
        returns[:, t] = running_return
        running_return = running_return * response_mask[:, t]
    advantages = masked_whiten(returns, response_mask)
    advantages = advantages * response_mask
    return advantages, returns


def compute_grpo_passk_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6,
                                         norm_adv_by_std_in_grpo=True):
    """norm_adv_by_std_in_grpo is the one verl main reads from config (its own argument is ignored)."""
    scores = token_level_rewards.sum(axis=-1)
    advantages = np.zeros_like(scores)
    id2scores, id2indices = {}, {}
    for i in range(scores.shape[0]):
        id2scores.setdefault(index[i], []).append(scores[i])
        id2indices.setdefault(index[i], []).append(i)
    for idx in id2scores:
        rewards = np.array(id2scores[idx])
        if rewards.size < 2:
            raise ValueError(f"Pass@k requires at least 2 samples per group. Got {rewards.size} for group {idx}.")
        topk_idx = np.argsort(-rewards, kind="stable")[:2]
        r_max, r_second_max = rewards[topk_idx[0]], rewards[topk_idx[1]]
        i_max = id2indices[idx][topk_idx[0]]
        advantage = r_max - r_second_max
        if norm_adv_by_std_in_grpo:
            advantage = advantage / (np.std(rewards, ddof=1) + epsilon)
        advantages[i_max] = advantage
    advantages = advantages[:, None] * response_mask
    return advantages, advantages
