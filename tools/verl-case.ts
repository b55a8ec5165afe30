// Runs one recorded verl case (the format of the outside-truth fixture verl/sample.json: function, kwargs, inputs)
// through this engine's kernels and returns {outputs} under verl's output names. `node tools/verl-case.js
// CASE.json` prints that object; a case verl refused (`raises`) prints {"outputs": {}, "raises": message}.
import { readFile } from 'node:fs/promises';
import { Engine } from '../engine/index.ts';
import {
  aggLoss, applyKlPenalty, computeActorLossFromLogits, computeRewards, computeAdvantage, computeEntropyLoss, computeGaeAdvantageReturn,
  computePolicyLoss, computePolicyLossBypassMode, computeValueLoss, getKlController, gsm8k, klPenalty, logitsBackward, logprobsAndEntropyFromLogits,
  maskedMean, maskedRowSums, maskedSum, maskedVar, maskedWhiten, shapeOf, toMatrix, AdaptiveKLController, FixedKLController,
  type AggOptions, type BypassCorrectionPlan, type KLController, type Matrix, type PolicyLossOptions,
} from './verl/index.ts';
import { parseRolloutRs } from '../ppo/config/rollout-rs-spec.ts';
import { rolloutIsWeights, rolloutMismatchMetrics, rolloutRejectionMask } from '../ppo/algorithm/rollout-correction.ts';
import { bypassCorrection } from '../ppo/algorithm/bypass-correction.ts';
import { drawWithReplacement, pfPpoWeights } from '../ppo/algorithm/pf-ppo.ts';
import { Rng } from '../engine/rng.ts';
import type { Gsm8kMethod } from '../ppo/rewards/gsm8k.ts';
import { computeScore, toRewardScore, type RewardResult } from '../ppo/rewards/index.ts';
import * as math from '../ppo/rewards/math.ts';
import * as mathDapo from '../ppo/rewards/math-dapo.ts';
import * as qaEm from '../ppo/rewards/qa-em.ts';

export interface VerlCase {
  id?: string;
  /** The seed verl's run was given (clip_cov's random pick and PF-PPO's draws here use it, though not torch's generator). */
  seed?: number;
  function: string;
  kwargs: Record<string, unknown>;
  inputs: Record<string, unknown>;
}

type Outputs = Record<string, unknown>;

/** kwargs with verl's dotted config keys ("config.clip_ratio", "config.policy_loss.clip_cov_ratio") and plain keys looked up alike. */
function kwarg<V>(c: VerlCase, name: string, fallback: V): V {
  const nested = (c.kwargs.config as Record<string, unknown> | undefined);
  const value = c.kwargs[name] ?? c.kwargs[`config.${name}`] ?? c.kwargs[`config.policy_loss.${name}`] ?? nested?.[name]
    ?? (nested?.policy_loss as Record<string, unknown> | undefined)?.[name];
  return value === undefined || value === null ? fallback : (value as V);
}

function input<V>(c: VerlCase, ...names: string[]): V {
  for (const name of names) if (c.inputs[name] !== undefined) return c.inputs[name] as V;
  throw new Error(`case ${c.id ?? c.function}: input ${names.join(' / ')} is missing`);
}

function aggOptions(c: VerlCase, defaultMode = 'token-mean'): AggOptions {
  const info = kwarg<Record<string, number>>(c, 'global_batch_info', {});
  const pick = (key: string): number | undefined => (c.kwargs[key] ?? info[key]) as number | undefined;
  return {
    lossAggMode: kwarg(c, 'loss_agg_mode', defaultMode),
    dpSize: pick('dp_size'),
    batchNumTokens: pick('batch_num_tokens'),
    globalBatchSize: pick('global_batch_size'),
    lossScaleFactor: pick('loss_scale_factor'),
  };
}

function policyOptions(c: VerlCase, lossMode: string): PolicyLossOptions {
  const clipRatio = kwarg(c, 'clip_ratio', kwarg(c, 'cliprange', 0.2));
  const optional = (name: string): number | undefined => kwarg<number | undefined>(c, name, undefined);
  return {
    lossMode,
    clipRatio,
    clipRatioLow: kwarg(c, 'clip_ratio_low', kwarg(c, 'cliprange_low', clipRatio)),
    clipRatioHigh: kwarg(c, 'clip_ratio_high', kwarg(c, 'cliprange_high', clipRatio)),
    clipRatioC: kwarg(c, 'clip_ratio_c', 3.0),
    tauPos: optional('tau_pos'), tauNeg: optional('tau_neg'),
    clipCovRatio: optional('clip_cov_ratio'), clipCovLb: optional('clip_cov_lb'), clipCovUb: optional('clip_cov_ub'),
    klCovRatio: optional('kl_cov_ratio'), ppoKlCoef: optional('ppo_kl_coef'),
  };
}

/** The metric keys each verl policy loss returns (gpg none, clip_cov no pg_clipfrac_lower, kl_cov only ppo_kl). */
const POLICY_METRICS: Record<string, readonly string[]> = {
  gpg: [], clip_cov: ['actor/pg_clipfrac', 'actor/ppo_kl'], kl_cov: ['actor/ppo_kl'],
};

/** The loss mode a policy-loss case names: compute_policy_loss_<mode>, get_policy_loss_fn('<mode>') or its name kwarg. */
function policyLossMode(c: VerlCase, name: string): string | null {
  if (c.function.includes('get_policy_loss_fn')) {
    const quoted = /get_policy_loss_fn\(\s*['"]([^'"]+)['"]/.exec(c.function)?.[1];
    return String(c.kwargs.name ?? c.kwargs.loss_mode ?? quoted ?? kwarg(c, 'loss_mode', 'vanilla'));
  }
  if (name === 'compute_policy_loss') return 'vanilla';
  const mode = /^compute_policy_loss_(\w+)$/.exec(name)?.[1];
  return mode ?? null;
}

/** A key of verl's config.policy_loss.rollout_correction (bypass mode's settings), dotted, nested or plain. */
function rolloutCorrectionKwarg<V>(c: VerlCase, name: string, fallback: V): V {
  const nested = (c.kwargs.config as { policy_loss?: { rollout_correction?: Record<string, unknown> } } | undefined)?.policy_loss?.rollout_correction;
  const value = c.kwargs[`config.policy_loss.rollout_correction.${name}`] ?? nested?.[name];
  return value === undefined || value === null ? kwarg(c, name, fallback) : (value as V);
}

/** rollout_rs and rollout_rs_threshold parsed (`fallback`: the options when the case gives none; null: no rejection). */
function rolloutRsKwargs(c: VerlCase, fallback: string | null): BypassCorrectionPlan['rolloutRs'] {
  const options = rolloutCorrectionKwarg<string | null>(c, 'rollout_rs', fallback);
  const threshold = rolloutCorrectionKwarg<string | number | null>(c, 'rollout_rs_threshold', null);
  return options === null ? null : parseRolloutRs(options, threshold === null ? null : String(threshold));
}

/** Bypass mode's settings, with the defaults of verl's compute_policy_loss_bypass_mode and of
 *  compute_rollout_correction_and_rejection_mask (no weights, no rejection). */
function bypassPlan(c: VerlCase): BypassCorrectionPlan {
  const is = rolloutCorrectionKwarg<'token' | 'sequence' | null>(c, 'rollout_is', null);
  return {
    lossType: rolloutCorrectionKwarg(c, 'loss_type', 'ppo_clip'),
    rolloutIs: is === null ? null : {
      level: is, threshold: rolloutCorrectionKwarg(c, 'rollout_is_threshold', 2.0), batchNormalize: rolloutCorrectionKwarg(c, 'rollout_is_batch_normalize', false),
    },
    rolloutRs: rolloutRsKwargs(c, null),
  };
}

function controllerFrom(config: Record<string, unknown>): KLController {
  return getKlController({
    type: String(config.type), kl_coef: Number(config.kl_coef), target_kl: config.target_kl as number | undefined, horizon: config.horizon as number | undefined,
  });
}

/** A reward case's input to call i: solution_str is one string (one call) or a list (a call per element); beside a
 *  list, an input that is a list gives each call its element, any other value is every call's. */
function callInput(c: VerlCase, i: number, name: string): unknown {
  const value = input<unknown>(c, name);
  return Array.isArray(c.inputs.solution_str) && Array.isArray(value) ? value[i] : value;
}

type CaseReward = (arg: (name: string) => unknown) => RewardResult;

/** The reward function a case names, called with one call's inputs by verl's argument names:
 *  verl.utils.reward_score.<module>.<function>, or default_compute_score, routed by data_source as training routes it. */
function scoreFunction(c: VerlCase): CaseReward {
  const [module, name] = c.function.split('.').slice(-2);
  const formatScore = kwarg(c, 'format_score', 0);
  const score = kwarg(c, 'score', 1);
  const solution = (arg: (name: string) => unknown) => arg('solution_str') as string;
  const truth = (arg: (name: string) => unknown) => arg('ground_truth') as string;
  if (name === 'default_compute_score') {
    return (arg) => computeScore(arg('data_source') as string, solution(arg), arg('ground_truth'),
      c.inputs.extra_info === undefined ? null : arg('extra_info') as Record<string, unknown> | null);
  }
  if (module === 'gsm8k') {
    const method = kwarg<Gsm8kMethod>(c, 'method', 'strict');
    return (arg) => gsm8k.computeScore(solution(arg), truth(arg), method, formatScore, score);
  }
  // math: the module's name before verl renamed it math_reward (f346f96d2), as older recorded suites call it.
  if (module === 'math' || module === 'math_reward') return (arg) => math.computeScore(solution(arg), truth(arg));
  if (module === 'math_dapo') {
    const strictBoxVerify = kwarg(c, 'strict_box_verify', false);
    const pauseTokensIndex = kwarg<number[] | null>(c, 'pause_tokens_index', null);
    return (arg) => mathDapo.computeScore(solution(arg), truth(arg), strictBoxVerify, pauseTokensIndex);
  }
  if (module === 'qa_em') {
    // Search-R1's fork: compute_score_em / compute_score_subem over prompt + response.
    return (arg) => qaEm.computeScoreSearchR1(solution(arg), arg('ground_truth') as { target: qaEm.GoldenAnswers }, name === 'compute_score_subem', formatScore, score);
  }
  if (module === 'search_r1_like_qa_em') {
    const scorer = name === 'compute_score_subem' ? qaEm.computeScoreSubem : qaEm.computeScore;
    return (arg) => scorer(solution(arg), arg('ground_truth') as { target: qaEm.GoldenAnswers }, formatScore, score);
  }
  throw new Error(`verl-case: no reward module ${module} (known: gsm8k, math, math_reward, math_dapo, search_r1_like_qa_em, qa_em, and reward_score.default_compute_score)`);
}

/** A reward case's outputs: `score`, one per call (a list when solution_str is one). When the function returned
 *  verl's dicts (math_dapo's {score, acc, pred}), also `result`, what it returned, and each other field of the
 *  dicts by its name (null for a call without it). */
function rewardOutputs(c: VerlCase, reward: CaseReward): Outputs {
  const solutions = input<unknown>(c, 'solution_str');
  const calls = Array.isArray(solutions) ? solutions.length : 1;
  const results = Array.from({ length: calls }, (_, i) => reward((name) => callInput(c, i, name)));
  const scored = results.map((r) => toRewardScore(r, c.function));
  const perCall = (values: unknown[]) => (Array.isArray(solutions) ? values : values[0]);
  const outputs: Outputs = { score: perCall(scored.map((r) => r.score)) };
  if (scored.every((r) => r.rewardExtraInfo === null)) return outputs;
  outputs.result = perCall(results);
  for (const key of new Set(scored.flatMap((r) => Object.keys(r.rewardExtraInfo ?? {})))) {
    if (key !== 'score') outputs[key] = perCall(scored.map((r) => r.rewardExtraInfo?.[key] ?? null));
  }
  return outputs;
}

const OUTCOME_FUNCTIONS: Record<string, string> = {
  compute_grpo_outcome_advantage: 'grpo',
  compute_rloo_outcome_advantage: 'rloo',
  compute_opo_outcome_advantage: 'opo',
  compute_reinforce_plus_plus_baseline_outcome_advantage: 'reinforce_plus_plus_baseline',
  compute_grpo_passk_outcome_advantage: 'grpo_passk',
  compute_reinforce_plus_plus_outcome_advantage: 'reinforce_plus_plus',
  compute_remax_outcome_advantage: 'remax',
  compute_grpo_vectorized_outcome_advantage: 'grpo_vectorized',
  compute_rloo_vectorized_outcome_advantage: 'rloo_vectorized',
  compute_gpg_outcome_advantage: 'gpg',
  compute_optimal_token_baseline_advantage: 'optimal_token_baseline',
  compute_multi_turn_optimal_token_baseline_advantage: 'tir_optimal_token_baseline',
};

async function runPipeline(engine: Engine, c: VerlCase): Promise<Outputs> {
  const mask = input<Matrix>(c, 'response_mask');
  const kl = await applyKlPenalty(engine, {
    tokenLevelScores: input(c, 'token_level_scores'), oldLogProbs: input(c, 'old_log_probs'), refLogProb: input(c, 'ref_log_prob'), responseMask: mask,
    klCtrl: controllerFrom({ type: kwarg(c, 'kl_ctrl_type', 'fixed'), kl_coef: kwarg(c, 'kl_coef', 0.001), target_kl: kwarg(c, 'target_kl', undefined), horizon: kwarg(c, 'horizon', undefined) }),
    klPenalty: kwarg(c, 'kl_penalty', 'kl'),
  });
  const gae = await computeGaeAdvantageReturn(engine, {
    tokenLevelRewards: kl.tokenLevelRewards, values: input(c, 'values'), responseMask: mask, gamma: kwarg(c, 'gamma', 1), lam: kwarg(c, 'lam', 1),
  });
  const agg = aggOptions(c);
  const actor = await computeActorLossFromLogits(engine, {
    logits: input(c, 'logits'), responses: input(c, 'responses'), oldLogProb: input(c, 'old_log_probs'), advantages: gae.advantages, responseMask: mask,
    entropyCoeff: kwarg(c, 'entropy_coeff', 0), refLogProb: kwarg(c, 'use_kl_loss', true) ? input(c, 'ref_log_prob') : undefined,
    klLossCoef: kwarg(c, 'kl_loss_coef', 0.001), klLossType: kwarg(c, 'kl_loss_type', 'low_var_kl'),
    ...policyOptions(c, kwarg(c, 'loss_mode', 'vanilla')), ...agg,
  });
  const critic = await computeValueLoss(engine, {
    vpreds: input(c, 'vpreds'), returns: gae.returns, values: input(c, 'values'), responseMask: mask, cliprangeValue: kwarg(c, 'cliprange_value', 0.5), ...agg,
  });
  return {
    token_level_rewards: kl.tokenLevelRewards, kl_metrics: kl.metrics, advantages: gae.advantages, returns: gae.returns,
    log_prob: actor.logProb, entropy: actor.entropy, pg_loss: actor.pgLoss, pg_metrics: actor.metrics, entropy_agg: actor.entropyAgg,
    kl_loss: actor.klLoss, policy_loss: actor.policyLoss, grad_logits_of_policy_loss: actor.gradLogits,
    vf_loss: critic.vfLoss, vf_clipfrac: critic.vfClipfrac, grad_vpreds_of_vf_loss: critic.gradVpreds,
  };
}

const ROLLOUT_CORR_PREFIX = 'rollout_corr/';

/** verl's rollout_corr_helper functions (host arithmetic, ppo/algorithm/rollout-correction.ts): their outputs under
 *  the names of their return statements, metrics without the rollout_corr/ prefix except where verl adds it. */
function rolloutCorrectionRoute(c: VerlCase, name: string): Outputs | null {
  const mask = () => input<Matrix>(c, 'response_mask');
  const flat = (m: Matrix) => Float32Array.from(m.flat());
  const unprefixed = (metrics: Record<string, number>) => Object.fromEntries(Object.entries(metrics).map(([k, v]) => [k.replace(ROLLOUT_CORR_PREFIX, ''), v]));
  const isLevel = () => kwarg<'token' | 'sequence'>(c, 'rollout_is', 'token');
  switch (name) {
    case 'compute_rollout_correction_weights': {
      const logRatio = input<Matrix>(c, 'log_ratio');
      const { B, T } = shapeOf('log_ratio', logRatio);
      const r = rolloutIsWeights(flat(logRatio), new Float32Array(B * T), flat(mask()), B, T, isLevel(),
        kwarg(c, 'rollout_is_threshold', 2.0), kwarg(c, 'rollout_is_batch_normalize', false));
      return { rollout_is_weights: toMatrix(r.weights, B, T), metrics: unprefixed(r.metrics) };
    }
    case 'compute_rollout_rejection_mask': {
      const logRatio = input<Matrix>(c, 'log_ratio');
      const { B, T } = shapeOf('log_ratio', logRatio);
      const r = rolloutRejectionMask(flat(logRatio), new Float32Array(B * T), flat(mask()), B, T, rolloutRsKwargs(c, 'token_k1')!);
      return { modified_response_mask: toMatrix(r.mask, B, T), metrics: unprefixed(r.metrics) };
    }
    case 'compute_offpolicy_metrics': {
      const old = input<Matrix>(c, 'old_log_prob');
      const rollout = c.inputs.rollout_log_prob as Matrix | null | undefined;
      const { B, T } = shapeOf('old_log_prob', old);
      const metrics = unprefixed(rolloutMismatchMetrics(flat(old), flat(rollout ?? old), flat(mask()), B, T));
      // Without the rollout's log-probs verl reports the training policy's perplexity alone.
      return { metrics: rollout ? metrics : { training_ppl: metrics.training_ppl, training_log_ppl: metrics.training_log_ppl } };
    }
    case 'compute_rollout_correction_and_rejection_mask': {
      const old = input<Matrix>(c, 'old_log_prob');
      const rollout = input<Matrix>(c, 'rollout_log_prob');
      const { B, T } = shapeOf('old_log_prob', old);
      // The same weights, rejection and drift metrics that bypass mode takes per micro-batch (its loss type aside).
      const r = bypassCorrection(bypassPlan(c), flat(old), flat(rollout), flat(mask()), new Float32Array(B * T), B, T);
      return { rollout_is_weights: r.weights ? toMatrix(r.weights, B, T) : null, modified_response_mask: toMatrix(r.policyMask ?? flat(mask()), B, T), metrics: r.metrics };
    }
  }
  return null;
}

export async function runVerlCase(engine: Engine, c: VerlCase): Promise<Outputs> {
  const fn = c.function;
  const name = fn.split('.').pop()!;
  if (fn.includes(' -> ')) return runPipeline(engine, c);
  if (fn.startsWith('verl.utils.torch_functional.masked_')) {
    const values = input<Matrix>(c, 'values');
    const mask = input<Matrix>(c, 'mask');
    const rows = await maskedRowSums(engine, values, mask);
    return {
      masked_sum_all: await maskedSum(engine, values, mask),
      masked_mean_all: await maskedMean(engine, values, mask),
      'masked_mean_axis_-1': rows.mean,
      'masked_sum_axis_-1': rows.sum,
      masked_var_unbiased: await maskedVar(engine, values, mask, true),
      masked_var_biased: await maskedVar(engine, values, mask, false),
      masked_whiten_shift_mean_true: await maskedWhiten(engine, values, mask, true),
      masked_whiten_shift_mean_false: await maskedWhiten(engine, values, mask, false),
    };
  }
  switch (name) {
    case 'entropy_from_logits': {
      const logits = input<number[][][]>(c, 'logits');
      const ones = logits.map((row) => row.map(() => 1));
      return { entropy: (await logprobsAndEntropyFromLogits(engine, logits, null)).entropy, grad_logits_of_sum_entropy: await logitsBackward(engine, logits, null, null, ones) };
    }
    case 'logprobs_from_logits':
    case 'logprobs_from_logits_naive':
    case 'logprobs_from_logits_v2': {
      const logits = input<number[][][]>(c, 'logits');
      const labels = input<Matrix>(c, 'labels');
      const ones = labels.map((row) => row.map(() => 1));
      return { logprobs: (await logprobsAndEntropyFromLogits(engine, logits, labels)).logProb, grad_logits_of_sum_logprobs: await logitsBackward(engine, logits, labels, ones, null) };
    }
    case 'kl_penalty': {
      const { kl, grad } = await klPenalty(engine, input(c, 'logprob'), input(c, 'ref_logprob'), kwarg(c, 'kl_penalty', 'kl'));
      return { kl, grad_logprob_of_sum: grad };
    }
    case 'update': {
      const controller: KLController = fn.includes('Adaptive')
        ? new AdaptiveKLController(kwarg(c, 'init_kl_coef', 0), kwarg(c, 'target_kl', 0), kwarg(c, 'horizon', 0))
        : new FixedKLController(kwarg(c, 'kl_coef', 0));
      const kls = input<number[]>(c, 'current_kl_seq');
      const steps = input<number[]>(c, 'n_steps_seq');
      return { value_after_each_update: kls.map((kl, i) => (controller.update(kl, steps[i]), controller.value)) };
    }
    case 'apply_kl_penalty': {
      const klCtrl = controllerFrom(kwarg(c, 'kl_ctrl', {}));
      const r = await applyKlPenalty(engine, {
        tokenLevelScores: input(c, 'token_level_scores'), oldLogProbs: input(c, 'old_log_probs'), refLogProb: input(c, 'ref_log_prob'),
        responseMask: input(c, 'response_mask', 'attention_mask'), klCtrl, klPenalty: kwarg(c, 'kl_penalty', 'kl'),
      });
      return { token_level_rewards: r.tokenLevelRewards, metrics: r.metrics, kl_ctrl_value_after: klCtrl.value };
    }
    case 'compute_gae_advantage_return': {
      const r = await computeGaeAdvantageReturn(engine, {
        tokenLevelRewards: input(c, 'token_level_rewards'), values: input(c, 'values'), responseMask: input(c, 'response_mask', 'eos_mask'),
        gamma: kwarg(c, 'gamma', 1), lam: kwarg(c, 'lam', 1),
      });
      return { advantages: r.advantages, returns: r.returns };
    }
    case 'agg_loss': {
      const r = await aggLoss(engine, input(c, 'loss_mat'), input(c, 'loss_mask'), aggOptions(c));
      return { loss: r.loss };
    }
    case 'compute_value_loss': {
      const r = await computeValueLoss(engine, {
        vpreds: input(c, 'vpreds'), returns: input(c, 'returns'), values: input(c, 'values'), responseMask: input(c, 'response_mask', 'eos_mask'),
        cliprangeValue: kwarg(c, 'cliprange_value', 0.5), ...aggOptions(c),
      });
      return { vf_loss: r.vfLoss, vf_clipfrac: r.vfClipfrac, grad_vpreds: r.gradVpreds };
    }
    case 'compute_entropy_loss': {
      const r = await computeEntropyLoss(engine, input(c, 'logits'), input(c, 'response_mask', 'eos_mask'), aggOptions(c));
      return { entropy_loss: r.entropyLoss, grad_logits: r.gradLogits };
    }
    case 'compute_score':
    case 'compute_score_em':
    case 'compute_score_subem':
    case 'default_compute_score':
      return rewardOutputs(c, scoreFunction(c));
    case 'clip_by_value': {
      // torch.max(torch.min(x, tensor_max), tensor_min), bounds broadcast like x (a scalar or a same-shaped matrix).
      const x = input<Matrix>(c, 'x');
      const bound = (v: unknown, b: number, t: number): number => (Array.isArray(v) ? (Array.isArray(v[0]) ? v[b][t] : v[t]) : (v as number));
      const lo = input<unknown>(c, 'tensor_min');
      const hi = input<unknown>(c, 'tensor_max');
      const clipped = x.map((row, b) => row.map((v, t) => Math.max(Math.min(v, bound(hi, b, t)), bound(lo, b, t))));
      return { clipped, output: clipped };
    }
    case 'compute_pf_ppo_reweight_data': {
      // verl resamples the batch by torch.multinomial over these weights: its draws cannot be reproduced outside
      // torch, so the weights are the deterministic output. With a seed, sample_indices are this engine's draws
      // (its generator seeded with it): the same distribution, other rows than verl's.
      const scores = input<Matrix>(c, 'token_level_scores').map((row) => row.reduce((sum, v) => sum + v, 0));
      const weights = pfPpoWeights(scores, kwarg(c, 'reweight_method', 'pow'), kwarg(c, 'weight_pow', 2.0));
      return { weights: Array.from(weights), ...(c.seed === undefined ? {} : { sample_indices: drawWithReplacement(weights, scores.length, new Rng(c.seed)) }) };
    }
    case 'compute_rewards': {
      const r = await computeRewards(engine, {
        tokenLevelScores: input(c, 'token_level_scores'), oldLogProb: input(c, 'old_log_prob', 'old_log_probs'), refLogProb: input(c, 'ref_log_prob'),
        klRatio: kwarg(c, 'kl_ratio', 0),
      });
      return { rewards: r, token_level_rewards: r, output: r };
    }
  }
  const correction = rolloutCorrectionRoute(c, name);
  if (correction) return correction;
  const lossMode = policyLossMode(c, name);
  if (name === 'compute_policy_loss_reinforce') {
    // verl's compute_policy_loss_reinforce: −A·log π·w, which is gpg's loss of advantages × w.
    const advantages = input<Matrix>(c, 'advantages');
    const weights = c.inputs.rollout_is_weights as Matrix | null | undefined;
    const r = await computePolicyLoss(engine, {
      oldLogProb: input(c, 'rollout_log_prob', 'old_log_prob'), logProb: input(c, 'log_prob'), responseMask: input(c, 'response_mask'),
      advantages: weights ? advantages.map((row, b) => row.map((a, t) => a * weights[b][t])) : advantages, ...policyOptions(c, 'gpg'), ...aggOptions(c, 'seq-mean-token-sum'),
    });
    return { pg_loss: r.pgLoss, metrics: { 'actor/ppo_kl': r.metrics['actor/ppo_kl'] }, grad_log_prob: r.gradLogProb };
  }
  if (lossMode === 'bypass_mode') {
    const correction = bypassPlan(c);
    const r = await computePolicyLossBypassMode(engine, {
      oldLogProb: input(c, 'old_log_prob'), logProb: input(c, 'log_prob'), advantages: input(c, 'advantages'), responseMask: input(c, 'response_mask'),
      correction, ...policyOptions(c, 'vanilla'), ...aggOptions(c),
    });
    const keys = correction.lossType === 'reinforce' ? ['actor/ppo_kl'] : ['actor/pg_clipfrac', 'actor/ppo_kl', 'actor/pg_clipfrac_lower'];
    const rollout = Object.entries(r.metrics).filter(([k]) => k.startsWith('rollout_corr/'));
    return { pg_loss: r.pgLoss, metrics: { ...Object.fromEntries(keys.map((k) => [k, r.metrics[k]])), ...Object.fromEntries(rollout) }, grad_log_prob: r.gradLogProb };
  }
  if (lossMode) {
    // gspo and sapo aggregate as seq-mean-token-mean whatever is passed (the kernel forces it); the others default to token-mean.
    const r = await computePolicyLoss(engine, {
      oldLogProb: input(c, 'old_log_prob'), logProb: input(c, 'log_prob'), advantages: input(c, 'advantages'), responseMask: input(c, 'response_mask', 'eos_mask'),
      ...policyOptions(c, lossMode), ...aggOptions(c, lossMode === 'gspo' || lossMode === 'sapo' ? 'seq-mean-token-mean' : 'token-mean'), seed: c.seed,
    });
    const keys = POLICY_METRICS[lossMode] ?? ['actor/pg_clipfrac', 'actor/ppo_kl', 'actor/pg_clipfrac_lower'];
    return { pg_loss: r.pgLoss, metrics: Object.fromEntries(keys.map((k) => [k, r.metrics[k]])), grad_log_prob: r.gradLogProb };
  }
  const estimator = OUTCOME_FUNCTIONS[name];
  if (estimator === 'optimal_token_baseline' || estimator === 'tir_optimal_token_baseline') {
    const weights = c.inputs.rollout_is_weights as Matrix | null | undefined;
    // Without handle_zero_tail, each function's own default (HANDLE_ZERO_TAIL in ppo/algorithm/advantage-estimators.ts).
    const r = await computeAdvantage(engine, estimator, {
      tokenLevelRewards: input(c, 'token_level_rewards'), responseMask: input(c, 'response_mask'), index: input(c, 'index'),
      oldLogProbs: input(c, 'old_log_probs'), sumPiSquared: input(c, 'sum_pi_squared'), rolloutIsWeights: weights ?? undefined,
      handleZeroTail: kwarg<boolean | undefined>(c, 'handle_zero_tail', undefined), epsilon: kwarg(c, 'epsilon', 1e-8),
    });
    return { advantages: r.advantages, returns: r.returns };
  }
  if (estimator) {
    const r = await computeAdvantage(engine, estimator, {
      tokenLevelRewards: input(c, 'token_level_rewards'), responseMask: input(c, 'response_mask', 'eos_mask'),
      index: estimator === 'reinforce_plus_plus' || estimator === 'remax' ? [] : input(c, 'index'),
      epsilon: kwarg(c, 'epsilon', 1e-6), normAdvByStdInGrpo: kwarg(c, 'norm_adv_by_std_in_grpo', true),
      gamma: kwarg(c, 'gamma', 1), rewardBaselines: estimator === 'remax' ? input(c, 'reward_baselines') : undefined, fNorm: kwarg(c, 'f_norm', 1),
    });
    return { advantages: r.advantages, returns: r.returns };
  }
  throw new Error(`verl-case: no implementation of ${fn}`);
}

export async function main(path: string | undefined): Promise<number> {
  if (!path) {
    console.error('usage: node tools/verl-case.js CASE.json');
    return 2;
  }
  let c: VerlCase;
  try {
    c = JSON.parse(await readFile(path, 'utf8')) as VerlCase;
  } catch (error) {
    console.error(`verl-case: ${path}: ${(error as Error).message} (expected one case as JSON: {function, kwargs, inputs})`);
    return 2;
  }
  const engine = await Engine.create();
  try {
    console.log(JSON.stringify({ outputs: await runVerlCase(engine, c) }));
    return 0;
  } catch (error) {
    console.log(JSON.stringify({ outputs: {}, raises: (error as Error).message }));
    return 1;
  } finally {
    await engine.sync();
    engine.destroy();
  }
}
