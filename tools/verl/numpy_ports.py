"""numpy (float64) ports of verl's PPO math, line for line, for the goldens of test/webgpu/verl-case-routes.test.ts.

Ported from verl main b178a3cd: verl/trainer/ppo/core_algos.py (agg_loss, the deprecated compute_policy_loss, the
registered policy losses with rollout_is_weights, compute_gae_advantage_return,
compute_reinforce_plus_plus_outcome_advantage, compute_grpo_passk_outcome_advantage, AdaptiveKLController),
verl/trainer/ppo/rollout_corr_helper.py (compute_offpolicy_metrics) and verl/utils/torch_functional.py (masked_sum,
masked_mean, masked_var, masked_whiten); from verl v0.2.0.post2 fb532783 and Search-R1 a14dc3a the functions whose
signature or arithmetic differ (suffix _v02: no 1e-8 in masked_mean, GAE through masked positions, the policy loss
without dual clip; apply_kl_penalty; Search-R1's state-masked actor loss). Each function keeps verl's name,
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
                 ppo_kl_coef=0.1, dro_beta=None):
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
        self.dro_beta = dro_beta
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


def agg_loss_1dda039b(loss_mat, loss_mask, loss_agg_mode, dp_size=1, batch_num_tokens=None, global_batch_size=None,
                      loss_scale_factor=None):
    """verl-project/verl 1dda039b's agg_loss: token-sum, seq-mean-token-sum-norm per sequence of the global batch,
    ValueErrors for a missing global normaliser with dp_size > 1."""
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            if dp_size > 1:
                raise ValueError("(global) batch_num_tokens is required when dp_size > 1")
            batch_num_tokens = loss_mask.sum()
        return masked_sum(loss_mat, loss_mask) / batch_num_tokens * dp_size
    if loss_agg_mode == "token-sum":
        return masked_sum(loss_mat, loss_mask) * dp_size
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        seq_losses = np.sum(loss_mat * loss_mask, axis=-1)
        seq_mask = (np.sum(loss_mask, axis=-1) > 0).astype(np.float64)
        if global_batch_size is None:
            if dp_size > 1:
                raise ValueError("global_batch_size is required when dp_size > 1")
            global_batch_size = seq_mask.sum()
        loss = masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
        if loss_agg_mode == "seq-mean-token-sum-norm":
            loss /= loss_scale_factor if loss_scale_factor is not None else loss_mask.shape[-1]
        return loss
    if loss_agg_mode == "seq-mean-token-mean":
        seq_mask = np.sum(loss_mask, axis=-1)
        seq_losses = np.sum(loss_mat * loss_mask, axis=-1) / (seq_mask + 1e-8)
        seq_mask = (seq_mask > 0).astype(np.float64)
        if global_batch_size is None:
            if dp_size > 1:
                raise ValueError("global_batch_size is required when dp_size > 1")
            global_batch_size = seq_mask.sum()
        return masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
    raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")


def _dppo(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode, config, rollout_is_weights,
          binary_kl):
    """verl 1dda039b's compute_policy_loss_dppo_tv / _dppo_kl; the truncated ratio and the valid mask are detached
    (taken at the frozen log-probs)."""
    low, high = config.low(), config.high()
    negative_approx_kl = np.clip(log_prob - old_log_prob, -20.0, 20.0)
    ratio = np.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    clip_ratio_c = config.clip_ratio_c
    truncated_ratio = np.minimum(np.exp(np.clip(frozen - old_log_prob, -20.0, 20.0)), clip_ratio_c)
    prob = np.exp(frozen)
    old_prob = np.exp(old_log_prob)
    if binary_kl:
        bkl = old_prob * (old_log_prob - frozen) + (1 - old_prob) * np.log((1.0 - old_prob + 1e-8) / (1.0 - prob + 1e-8))
        valid_positive = (bkl <= high) | (prob <= old_prob)
        valid_negative = (bkl <= low) | (prob >= old_prob)
    else:
        valid_positive = (prob - old_prob) <= high
        valid_negative = (prob - old_prob) >= -low
    valid = np.where(advantages > 0, valid_positive, valid_negative).astype(np.float64)
    pg_losses = -advantages * truncated_ratio * log_prob * valid
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss_1dda039b(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info)
    pg_clipfrac = masked_mean(1.0 - valid, response_mask)
    pg_clipfrac_lower = masked_mean((ratio > clip_ratio_c).astype(np.float64) * valid, response_mask)
    return pg_loss, {"actor/pg_clipfrac": pg_clipfrac, "actor/ppo_kl": ppo_kl, "actor/pg_clipfrac_lower": pg_clipfrac_lower}


def compute_policy_loss_dppo_tv(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode="token-mean",
                                config=None, rollout_is_weights=None):
    return _dppo(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode, config, rollout_is_weights,
                 binary_kl=False)


def compute_policy_loss_dppo_kl(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode="token-mean",
                                config=None, rollout_is_weights=None):
    return _dppo(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode, config, rollout_is_weights,
                 binary_kl=True)


def compute_policy_loss_dro(old_log_prob, log_prob, advantages, response_mask, frozen, loss_agg_mode="token-mean",
                            config=None, rollout_is_weights=None):
    """verl 1dda039b's compute_policy_loss_dro: −(log π·A − β/2·(log π − log π_old)²), actor/ppo_kl unclamped."""
    beta = config.dro_beta
    if beta is None or beta <= 0:
        raise ValueError("policy_loss.dro_beta must be a positive value when using DRO")
    log_ratio = log_prob - old_log_prob
    pg_losses = -(log_prob * advantages - 0.5 * beta * log_ratio ** 2)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss_1dda039b(pg_losses, response_mask, loss_agg_mode, **config.global_batch_info)
    return pg_loss, {"actor/ppo_kl": masked_mean(-log_ratio, response_mask)}


POLICY_LOSSES = {
    "vanilla": compute_policy_loss_vanilla,
    "gspo": compute_policy_loss_gspo,
    "sapo": compute_policy_loss_sapo,
    "gpg": compute_policy_loss_gpg,
    "clip_cov": compute_policy_loss_clip_cov,
    "kl_cov": compute_policy_loss_kl_cov,
    "geo_mean": compute_policy_loss_geo_mean,
    "cispo": compute_policy_loss_cispo,
    "dppo_tv": compute_policy_loss_dppo_tv,
    "dppo_kl": compute_policy_loss_dppo_kl,
    "dro": compute_policy_loss_dro,
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


class AdaptiveKLController:
    """verl main and v0.2 alike."""

    def __init__(self, init_kl_coef, target_kl, horizon):
        self.value = init_kl_coef
        self.target = target_kl
        self.horizon = horizon

    def update(self, current_kl, n_steps):
        target = self.target
        proportional_error = np.clip(current_kl / target - 1, -0.2, 0.2)
        mult = 1 + proportional_error * n_steps / self.horizon
        self.value *= mult


class FixedKLController:
    def __init__(self, kl_coef):
        self.value = kl_coef

    def update(self, current_kl, n_steps):
        pass


# verl v0.2.0.post2 fb532783 (verl/trainer/ppo/core_algos.py, ray_trainer.py) and Search-R1 a14dc3a, whose
# verl/utils/torch_functional.py divides by the mask's sum without main's 1e-8.


def masked_mean_v02(values, mask, axis=None):
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


def masked_var_v02(values, mask, unbiased=True):
    mean = masked_mean_v02(values, mask)
    centered_values = values - mean
    variance = masked_mean_v02(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        if mask_sum == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        variance = variance * (mask_sum / (mask_sum - 1))
    return variance


def masked_whiten_v02(values, mask, shift_mean=True):
    mean, var = masked_mean_v02(values, mask), masked_var_v02(values, mask)
    whitened = (values - mean) / np.sqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


def compute_gae_advantage_return_v02(token_level_rewards, values, eos_mask, gamma, lam):
    """v0.2: GAE runs through masked positions (no skipping of observation tokens)."""
    lastgaelam = 0
    advantages_reversed = []
    gen_len = token_level_rewards.shape[-1]
    for t in reversed(range(gen_len)):
        nextvalues = values[:, t + 1] if t < gen_len - 1 else 0.0
        delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam = delta + gamma * lam * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = np.stack(advantages_reversed[::-1], axis=1)
    returns = advantages + values
    advantages = masked_whiten_v02(advantages, eos_mask)
    return advantages, returns


def compute_policy_loss_v02(old_log_prob, log_prob, advantages, eos_mask, cliprange):
    """v0.2: no ±20 clamp, no dual clip, a masked mean, three outputs."""
    negative_approx_kl = log_prob - old_log_prob
    ratio = np.exp(negative_approx_kl)
    ppo_kl = masked_mean_v02(-negative_approx_kl, eos_mask)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * np.clip(ratio, 1.0 - cliprange, 1.0 + cliprange)
    pg_loss = masked_mean_v02(np.maximum(pg_losses, pg_losses2), eos_mask)
    pg_clipfrac = masked_mean_v02((pg_losses2 > pg_losses).astype(np.float64), eos_mask)
    return pg_loss, pg_clipfrac, ppo_kl


def kl_penalty_kl(logprob, ref_logprob):
    """kl_penalty(..., "kl") of v0.2 and Search-R1."""
    return logprob - ref_logprob


def apply_kl_penalty(token_level_scores, old_log_probs, response_mask, kl_ctrl, ref_log_prob=None):
    """ray_trainer.apply_kl_penalty with kl_penalty='kl'. v0.2 takes response_mask from attention_mask's last
    response_length columns; Search-R1 a14dc3a from info_mask's when the batch has one (the caller passes it)."""
    batch_size = token_level_scores.shape[0]
    if ref_log_prob is not None:
        kld = kl_penalty_kl(old_log_probs, ref_log_prob)
        kld = kld * response_mask
        beta = kl_ctrl.value
    else:
        beta = 0
        kld = np.zeros_like(response_mask)
    token_level_rewards = token_level_scores - beta * kld
    current_kl = masked_mean_v02(kld, mask=response_mask, axis=-1)
    current_kl = float(np.mean(current_kl, axis=0))
    kl_ctrl.update(current_kl=current_kl, n_steps=batch_size)
    return token_level_rewards, {"critic/kl": current_kl, "critic/kl_coeff": beta}


# verl main b178a3cd: verl/trainer/ppo/rollout_corr_helper.py

SAFETY_BOUND = 20.0


def compute_offpolicy_metrics(old_log_prob, rollout_log_prob, response_mask):
    assert response_mask.any(), "Expected at least one valid token in response_mask"
    metrics = {}
    mean_log_prob_training = masked_mean(old_log_prob, response_mask, axis=-1)
    metrics["training_ppl"] = np.exp(-mean_log_prob_training).mean()
    metrics["training_log_ppl"] = (-mean_log_prob_training).mean()
    if rollout_log_prob is not None:
        metrics["kl"] = masked_mean(rollout_log_prob - old_log_prob, response_mask)
        log_ratio = old_log_prob - rollout_log_prob
        k3_kl_matrix = np.exp(log_ratio) - log_ratio - 1
        metrics["k3_kl"] = masked_mean(k3_kl_matrix, response_mask)
        mean_log_prob_rollout = masked_mean(rollout_log_prob, response_mask, axis=-1)
        metrics["rollout_ppl"] = np.exp(-mean_log_prob_rollout).mean()
        metrics["rollout_log_ppl"] = (-mean_log_prob_rollout).mean()
        log_ppl_diff = mean_log_prob_rollout - mean_log_prob_training
        metrics["log_ppl_diff"] = log_ppl_diff.mean()
        metrics["log_ppl_abs_diff"] = np.abs(log_ppl_diff).mean()
        metrics["log_ppl_diff_max"] = log_ppl_diff.max()
        metrics["log_ppl_diff_min"] = log_ppl_diff.min()
        metrics["ppl_ratio"] = np.exp(log_ppl_diff).mean()
        log_ratio_safe = np.clip(log_ratio, -SAFETY_BOUND, SAFETY_BOUND)
        rho_squared_token = np.square(np.exp(log_ratio_safe))
        metrics["chi2_token"] = masked_mean(rho_squared_token, response_mask) - 1.0
        log_ratio_sum = masked_sum(log_ratio, response_mask, axis=-1)
        log_ratio_sum_safe = np.clip(log_ratio_sum, -SAFETY_BOUND, SAFETY_BOUND)
        metrics["chi2_seq"] = np.exp(2.0 * log_ratio_sum_safe).mean() - 1.0
    return metrics


def compute_rollout_corr_metrics_from_logprobs(log_prob, rollout_log_prob, response_mask):
    metrics = compute_offpolicy_metrics(old_log_prob=log_prob, rollout_log_prob=rollout_log_prob,
                                        response_mask=response_mask)
    return {f"rollout_corr/{key}": float(value) for key, value in metrics.items()}


# Search-R1 a14dc3a (verl v0.2 with state masking): verl/utils/torch_functional.py, core_algos.py and
# workers/actor/dp_actor.py's update_policy for one micro-batch.


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def logprobs_from_logits(logits, labels):
    return np.take_along_axis(log_softmax(logits), labels[..., None], axis=-1)[..., 0]


def entropy_from_logits(logits):
    pd = np.exp(log_softmax(logits))
    top = logits.max(axis=-1, keepdims=True)
    logsumexp = (top + np.log(np.exp(logits - top).sum(axis=-1, keepdims=True)))[..., 0]
    return logsumexp - np.sum(pd * logits, axis=-1)


def kl_penalty_low_var_kl(logprob, ref_logprob):
    kl = ref_logprob - logprob
    ratio = np.exp(kl)
    kld = ratio - kl - 1
    return np.clip(kld, -10, 10)


def clip_by_value(x, tensor_min, tensor_max):
    return np.maximum(np.minimum(x, tensor_max), tensor_min)


def compute_value_loss_v02(vpreds, returns, values, eos_mask, cliprange_value):
    vpredclipped = clip_by_value(vpreds, values - cliprange_value, values + cliprange_value)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    vf_loss = 0.5 * masked_mean_v02(np.maximum(vf_losses1, vf_losses2), eos_mask)
    vf_clipfrac = masked_mean_v02((vf_losses2 > vf_losses1).astype(np.float64), eos_mask)
    return vf_loss, vf_clipfrac


def search_r1_actor_loss(logits, responses, old_log_prob, advantages, loss_mask, ref_log_prob, clip_ratio,
                         entropy_coeff, kl_loss_coef):
    """dp_actor.update_policy with state_masking and use_kl_loss (low_var_kl), temperature 1: the micro-batch's
    policy_loss and what it logs."""
    response_mask = loss_mask
    entropy = entropy_from_logits(logits)
    log_prob = logprobs_from_logits(logits, responses)
    pg_loss, pg_clipfrac, ppo_kl = compute_policy_loss_v02(old_log_prob, log_prob, advantages, response_mask,
                                                           clip_ratio)
    entropy_loss = masked_mean_v02(entropy, response_mask)
    policy_loss = pg_loss - entropy_loss * entropy_coeff
    kld = kl_penalty_low_var_kl(log_prob, ref_log_prob)
    kl_loss = masked_mean_v02(kld, response_mask)
    policy_loss = policy_loss + kl_loss * kl_loss_coef
    return {
        "log_prob": log_prob,
        "entropy": entropy,
        "pg_loss": pg_loss,
        "pg_metrics": {"actor/pg_clipfrac": pg_clipfrac, "actor/ppo_kl": ppo_kl},
        "entropy_agg": entropy_loss,
        "kl_loss": kl_loss,
        "policy_loss": policy_loss,
    }
