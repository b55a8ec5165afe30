"""Prints, as JSON, the goldens of test/support/verl-case-goldens.ts that come from verl main's functions, computed
by the numpy ports in numpy_ports.py on the inputs of test/webgpu/verl-case-routes.test.ts.

    python3 tools/verl/goldens.py            # the JSON, keyed as GOLDENS
    test/cpu/verl-goldens.test.ts            # checks GOLDENS against this output (skips without python3 + numpy)

Gradients are central differences (float64, h = 1e-6) of each port in its input (log_prob, logits, vpreds) with
verl's .detach() terms held at the evaluation point. Every entry of GOLDENS is printed: verl main's (the policy losses
with rollout_is_weights, the deprecated compute_policy_loss, GAE, REINFORCE++, pass@k, agg_loss, the adaptive KL
controller, ray_trainer.compute_advantage, rollout_corr_helper's metrics), verl v0.2.0.post2's (compute_policy_loss,
GAE, apply_kl_penalty, compute_advantage), Search-R1's (apply_kl_penalty on info_mask, the state-masked PPO step)
and verl-project/verl 1dda039b's (dppo_tv, dppo_kl, dro with rollout_is_weights; agg_loss with token-sum and the
global normalisers).
"""

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ports as verl  # noqa: E402

B, T = 4, 5
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=np.float64)
HOLES = np.array([[1, 1, 0, 1, 1], [1, 1, 0, 0, 0], [1, 0, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=np.float64)


def wave(phase, scale, offset=0.0):
    """The test's wave(): offset + scale·sin(1.7·b + 2.3·t + phase) (math.sin, as JavaScript's Math.sin)."""
    return np.array([[offset + scale * math.sin(1.7 * b + 2.3 * t + phase) for t in range(T)] for b in range(B)])


OLD = wave(0, 0.3, -1)
LOG_PROB = wave(1, 0.3, -1)
ADVANTAGES = wave(2, 1.5)
WEIGHTS = wave(3, 0.4, 1)
WEIGHTS[0, 1] = 0.0
WIDE = wave(4, 1.5, -1)
VALUES = wave(8, 0.5)


def numeric_grad(f, x, h=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += h
        minus[index] -= h
        grad[index] = (f(plus) - f(minus)) / (2 * h)
    return grad


WEIGHTED_CONFIGS = {
    "vanilla": {},
    "gspo": {},
    "sapo": {"tau_pos": 1, "tau_neg": 1.5},
    "gpg": {},
    "cispo": {"clip_ratio_low": 0.1, "clip_ratio_high": 0.15},
    "clip_cov": {"clip_cov_ratio": 1, "clip_cov_lb": 0, "clip_cov_ub": 5},
    "kl_cov": {"kl_cov_ratio": 0.2, "ppo_kl_coef": 0.5},
    "geo_mean": {"clip_ratio": 0.1},
    "dppo_tv": {"clip_ratio": 0.05, "clip_ratio_c": 1.1},
    "dppo_kl": {"clip_ratio": 0.01, "clip_ratio_c": 1.1},
    "dro": {"dro_beta": 0.7},
}


def weighted(mode):
    fn = verl.POLICY_LOSSES[mode]
    config = verl.ActorConfig(**{"clip_ratio": 0.2, **WEIGHTED_CONFIGS[mode]})
    run = lambda lp: fn(OLD, lp, ADVANTAGES, MASK, LOG_PROB, config=config, rollout_is_weights=WEIGHTS)  # noqa: E731
    pg_loss, metrics = run(LOG_PROB)
    return {
        "pg_loss": float(pg_loss),
        "metrics": {key: float(value) for key, value in metrics.items()},
        "grad_log_prob": numeric_grad(lambda lp: run(lp)[0], LOG_PROB).tolist(),
    }


def head_deprecated_policy():
    run = lambda lp: verl.compute_policy_loss(OLD, lp, ADVANTAGES, MASK, cliprange=0.2)  # noqa: E731
    pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower = run(WIDE)
    return {
        "pg_loss": float(pg_loss),
        "pg_clipfrac": float(pg_clipfrac),
        "ppo_kl": float(ppo_kl),
        "pg_clipfrac_lower": float(pg_clipfrac_lower),
        "grad_log_prob": numeric_grad(lambda lp: run(lp)[0], WIDE).tolist(),
    }


def gae_head():
    rewards = wave(7, 1) * HOLES
    advantages, returns = verl.compute_gae_advantage_return(rewards, VALUES, HOLES, gamma=0.9, lam=0.8)
    return {"advantages": advantages.tolist(), "returns": returns.tolist()}


def rfpp_gamma09():
    advantages, returns = verl.compute_reinforce_plus_plus_outcome_advantage(wave(7, 1) * MASK, MASK, gamma=0.9)
    return {"advantages": advantages.tolist(), "returns": returns.tolist()}


def passk_norm_false():
    outcome = np.zeros((B, T))
    for b, t, score in [(0, 4, 1), (1, 1, 0.2), (2, 2, 0.7), (3, 0, 0.4)]:
        outcome[b, t] = score
    advantages, _ = verl.compute_grpo_passk_outcome_advantage(
        outcome, MASK, ["a", "a", "b", "b"], norm_adv_by_std_in_grpo=False)
    return {"advantages": advantages.tolist()}


def v02_policy():
    run = lambda lp: verl.compute_policy_loss_v02(OLD, lp, ADVANTAGES, MASK, cliprange=0.2)  # noqa: E731
    pg_loss, pg_clipfrac, ppo_kl = run(WIDE)
    return {
        "pg_loss": float(pg_loss),
        "pg_clipfrac": float(pg_clipfrac),
        "ppo_kl": float(ppo_kl),
        "grad_log_prob": numeric_grad(lambda lp: run(lp)[0], WIDE).tolist(),
    }


def gae_v02():
    rewards = wave(7, 1) * HOLES
    advantages, returns = verl.compute_gae_advantage_return_v02(rewards, VALUES, HOLES, gamma=0.9, lam=0.8)
    return {"advantages": advantages.tolist(), "returns": returns.tolist()}


def scores():
    out = np.zeros((B, T))
    for b, t, score in [(0, 4, 1), (1, 1, 0.5), (2, 2, -1), (3, 0, 0.25)]:
        out[b, t] = score
    return out


def apply_kl(response_mask, with_ref=True):
    """The test's klCtrl (adaptive, kl_coef 0.05, target 0.1, horizon 100), REF = wave(5, 0.3, -1)."""
    kl_ctrl = verl.AdaptiveKLController(0.05, 0.1, 100)
    rewards, metrics = verl.apply_kl_penalty(scores(), OLD, response_mask, kl_ctrl,
                                             ref_log_prob=wave(5, 0.3, -1) if with_ref else None)
    return {
        "token_level_rewards": rewards.tolist(),
        "metrics": {key: float(value) for key, value in metrics.items()},
        "kl_ctrl_value_after": kl_ctrl.value,
    }


def compute_advantage_gae(v02):
    """ray_trainer.compute_advantage('gae', gamma 0.9, lam 0.8) on RW and VALUES: main passes response_mask, v0.2
    slices it from attention_mask (the test's prompt columns, then MASK)."""
    rewards = wave(7, 1) * MASK
    gae = verl.compute_gae_advantage_return_v02 if v02 else verl.compute_gae_advantage_return
    advantages, returns = gae(rewards, VALUES, MASK, gamma=0.9, lam=0.8)
    return {"advantages": advantages.tolist(), "returns": returns.tolist()}


def adaptive_controller():
    kl_ctrl = verl.AdaptiveKLController(0.05, 0.1, 100)
    values = []
    for current_kl, n_steps in [(0.2, 6), (0.05, 6), (0.1, 3)]:
        kl_ctrl.update(current_kl, n_steps)
        values.append(kl_ctrl.value)
    return {"value_after_each_update": values}


def search_r1_pipeline():
    """Search-R1's PPO step on the test's inputs: apply_kl_penalty on info_mask (fixed β 0.05, 'kl'), v0.2 GAE on
    the response mask (γ 0.9, λ 0.8), the state-masked actor loss on the logits, and the critic's value loss."""
    def wave3(phase, scale):
        return np.array([[[scale * math.sin(1.7 * b + 2.3 * t + 0.9 * v + phase) for v in range(3)] for t in range(T)]
                         for b in range(B)])

    labels = np.array([[(b + 2 * t) % 3 for t in range(T)] for b in range(B)])
    state = MASK * HOLES
    logits = wave3(0, 1.5)
    old_log_probs = verl.logprobs_from_logits(wave3(0.6, 1.5), labels)
    ref_log_prob = verl.logprobs_from_logits(wave3(1.1, 1.2), labels)
    kl_ctrl = verl.FixedKLController(0.05)
    token_level_rewards, kl_metrics = verl.apply_kl_penalty(scores(), old_log_probs, state, kl_ctrl,
                                                            ref_log_prob=ref_log_prob)
    advantages, returns = verl.compute_gae_advantage_return_v02(token_level_rewards, VALUES, MASK, gamma=0.9, lam=0.8)

    def actor(x):
        return verl.search_r1_actor_loss(x, labels, old_log_probs, advantages, state, ref_log_prob, clip_ratio=0.2,
                                         entropy_coeff=0.01, kl_loss_coef=0.001)

    loss = actor(logits)
    vpreds = wave(9, 0.7)
    critic = lambda v: verl.compute_value_loss_v02(v, returns, VALUES, MASK, cliprange_value=0.5)  # noqa: E731
    vf_loss, vf_clipfrac = critic(vpreds)
    return {
        "token_level_rewards": token_level_rewards.tolist(),
        "kl_metrics": {key: float(value) for key, value in kl_metrics.items()},
        "advantages": advantages.tolist(),
        "returns": returns.tolist(),
        "log_prob": loss["log_prob"].tolist(),
        "entropy": loss["entropy"].tolist(),
        "pg_loss": float(loss["pg_loss"]),
        "pg_metrics": {key: float(value) for key, value in loss["pg_metrics"].items()},
        "entropy_agg": float(loss["entropy_agg"]),
        "kl_loss": float(loss["kl_loss"]),
        "policy_loss": float(loss["policy_loss"]),
        "grad_logits_of_policy_loss": numeric_grad(lambda x: actor(x)["policy_loss"], logits).tolist(),
        "vf_loss": float(vf_loss),
        "vf_clipfrac": float(vf_clipfrac),
        "grad_vpreds_of_vf_loss": numeric_grad(lambda v: critic(v)[0], vpreds).tolist(),
    }


def agg_dp2():
    modes = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
    return {mode: float(verl.agg_loss(wave(6, 1), MASK, mode, dp_size=2)) for mode in modes}


def agg_1dda039b():
    """verl 1dda039b's agg_loss on the holes mask: local normalisers, then the trainer's global_batch_info."""
    modes = ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
    info = {"dp_size": 2, "batch_num_tokens": 30, "global_batch_size": 6, "loss_scale_factor": 7}
    return {
        "local": {mode: float(verl.agg_loss_1dda039b(wave(6, 1), HOLES, mode)) for mode in modes},
        "global": {mode: float(verl.agg_loss_1dda039b(wave(6, 1), HOLES, mode, **info)) for mode in modes},
    }


if __name__ == "__main__":
    goldens = {
        "weighted": {mode: weighted(mode) for mode in WEIGHTED_CONFIGS},
        "head_deprecated_policy": head_deprecated_policy(),
        "gae_head": gae_head(),
        "rfpp_gamma09": rfpp_gamma09(),
        "passk_norm_false": passk_norm_false(),
        "agg_dp2": agg_dp2(),
        "agg_1dda039b": agg_1dda039b(),
        "v02_policy": v02_policy(),
        "gae_v02": gae_v02(),
        "apply_kl_v02": apply_kl(MASK),
        "apply_kl_search_r1": apply_kl(HOLES),
        "apply_kl_v02_no_ref": apply_kl(MASK, with_ref=False),
        "compute_advantage_gae": compute_advantage_gae(v02=False),
        "compute_advantage_gae_v02": compute_advantage_gae(v02=True),
        "adaptive_controller": adaptive_controller(),
        "corr_metrics_from_logprobs": verl.compute_rollout_corr_metrics_from_logprobs(LOG_PROB, OLD, MASK),
        "search_r1_pipeline": search_r1_pipeline(),
    }
    json.dump(goldens, sys.stdout, indent=1)
    sys.stdout.write("\n")
