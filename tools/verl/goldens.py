"""Prints, as JSON, the goldens of test/support/verl-case-goldens.ts that come from verl main's functions, computed
by the numpy ports in numpy_ports.py on the inputs of test/webgpu/verl-case-routes.test.ts.

    python3 tools/verl/goldens.py            # the JSON, keyed as GOLDENS
    test/cpu/verl-goldens.test.ts            # checks GOLDENS against this output (skips without python3 + numpy)

Gradients are central differences (float64, h = 1e-6) of each port in log_prob with verl's .detach() terms held at
the evaluation point. Covered: weighted.*, head_deprecated_policy, gae_head, rfpp_gamma09, passk_norm_false,
agg_dp2. The goldens of verl v0.2.0.post2 and Search-R1 (v02_policy, gae_v02, apply_kl_*, search_r1_pipeline,
compute_advantage_gae_v02), of rollout_corr_helper.py (corr_metrics_from_logprobs), and adaptive_controller and
compute_advantage_gae are not ported yet.
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


def agg_dp2():
    modes = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
    return {mode: float(verl.agg_loss(wave(6, 1), MASK, mode, dp_size=2)) for mode in modes}


if __name__ == "__main__":
    goldens = {
        "weighted": {mode: weighted(mode) for mode in WEIGHTED_CONFIGS},
        "head_deprecated_policy": head_deprecated_policy(),
        "gae_head": gae_head(),
        "rfpp_gamma09": rfpp_gamma09(),
        "passk_norm_false": passk_norm_false(),
        "agg_dp2": agg_dp2(),
    }
    json.dump(goldens, sys.stdout, indent=1)
    sys.stdout.write("\n")
