// Runs one recorded verl case (the format of the outside-truth fixture verl/sample.json: function, kwargs, inputs)
// through this engine's kernels and returns {outputs} under verl's output names. `node tools/verl-case.js
// CASE.json` prints that object; a case verl refused (`raises`) prints {"outputs": {}, "raises": message}.
// A case answers as verl's function at its profile's commit would: verl main (head), or verl v0.2.0.post2
// (legacy_v020) and Search-R1's fork of it (search_r1), whose signatures (eos_mask, cliprange, gamma, …), semantics
// and metric names differ; tools/verl/signatures.ts holds both versions' parameters.
import { readFile } from 'node:fs/promises';
import { Engine } from '../engine/index.ts';
import {
  aggLoss,
  applyKlPenalty,
  computeActorLossFromLogits,
  computeRewards,
  computeAdvantage,
  computeEntropyLoss,
  computeGaeAdvantageReturn,
  computeGaeAdvantageReturnV02,
  computePolicyLoss,
  computePolicyLossBypassMode,
  computeValueLoss,
  getKlController,
  gsm8k,
  klPenalty,
  logitsBackward,
  logprobsAndEntropyFromLogits,
  maskedMean,
  maskedRowSums,
  maskedSum,
  maskedVar,
  maskedWhiten,
  shapeOf,
  toMatrix,
  AdaptiveKLController,
  FixedKLController,
  checkVerlSignature,
  type AggOptions,
  type BypassCorrectionPlan,
  type KLController,
  type Matrix,
  type PolicyLossOptions,
  type VerlVersion,
} from './verl/index.ts';
import { ADV_ESTIMATOR_TABLE } from '../ppo/config/advantage-estimator-table.ts';
import { NEWEST_VERL, VERL_VERSIONS, verlVersionOf, type VerlBehaviour } from './verl/verl-versions.ts';
import { parseRolloutRs } from '../ppo/config/rollout-rs-spec.ts';
import { POLICY_LOSS_MODES, policyLossMetrics, lossModeSpec } from '../kernels/ppo/policy-loss-modes.ts';
import { rolloutIsWeights, rolloutMismatchMetrics, rolloutRejectionMask } from '../ppo/algorithm/rollout-correction.ts';
import { bypassCorrection } from '../ppo/algorithm/bypass-correction.ts';
import { drawWithReplacement, pfPpoWeights } from '../ppo/algorithm/pf-ppo.ts';
import { Rng } from '../engine/rng.ts';
import type { Gsm8kMethod } from '../ppo/rewards/gsm8k.ts';
import { computeScore, toRewardScore, type RewardResult } from '../ppo/rewards/index.ts';
import * as math from '../ppo/rewards/math.ts';
import * as mathDapo from '../ppo/rewards/math-dapo.ts';
import * as qaEm from '../ppo/rewards/qa-em.ts';
import * as rlla from '../ppo/rewards/rlla.ts';

export interface VerlCase {
  id?: string;
  /**
   * Whose verl recorded it: head (verl main), legacy_v020 (verl v0.2.0.post2) or search_r1 (Search-R1's fork of v0.2).
   */
  profile?: string;
  verl_commit?: string;
  /** The tensors' dtype when a case names one (the recordings are float64). */
  dtype?: string;
  /**
   * The seed verl's run was given (clip_cov's random pick and PF-PPO's draws here use it, though not torch's
   * generator).
   */
  seed?: number;
  function: string;
  kwargs: Record<string, unknown>;
  inputs: Record<string, unknown>;
}

type Outputs = Record<string, unknown>;
type Fields = Record<string, unknown>;

/** The verl version a case answers as (its profile or commit; v0.2 for any call spelled with v0.2's eos_mask). */
function verlVersion(c: VerlCase): VerlVersion {
  return c.inputs.eos_mask !== undefined ? 'v02' : verlVersionOf(c.profile, c.verl_commit);
}

/** What the case's version computes differently (tools/verl/verl-versions.ts). */
function behaviour(c: VerlCase): VerlBehaviour {
  return VERL_VERSIONS[verlVersion(c)];
}

function isSearchR1(c: VerlCase): boolean {
  return c.profile === 'search_r1' || (c.verl_commit ?? '').startsWith('a14dc3a');
}

/** The case's kwargs as the objects verl's call received: dotted keys ("config.policy_loss.clip_cov_ratio") nested and
 *  merged with nested ones. */
function nestedKwargs(c: VerlCase): Fields {
  const root: Fields = {};
  const merge = (target: Fields, path: string[], value: unknown): void => {
    const [key, ...rest] = path;
    if (rest.length > 0) {
      if (!target[key] || typeof target[key] !== 'object') target[key] = {};
      merge(target[key] as Fields, rest, value);
    } else if (value && typeof value === 'object' && !Array.isArray(value)) {
      if (!target[key] || typeof target[key] !== 'object') target[key] = {};
      for (const [k, v] of Object.entries(value)) merge(target[key] as Fields, [k], v);
    } else {
      target[key] = value;
    }
  };
  for (const [key, value] of Object.entries(c.kwargs)) merge(root, key.split('.'), value);
  return root;
}

/** A field of an object argument (path "config.clip_ratio", "kl_ctrl.type"); undefined when the case gives none. */
function field(c: VerlCase, path: string): unknown {
  let node: unknown = nestedKwargs(c);
  for (const key of path.split('.')) node = node && typeof node === 'object' ? (node as Fields)[key] : undefined;
  return node;
}

const given = (value: unknown): boolean => value !== undefined && value !== null;

/** A keyword argument of verl's function itself (not a config field), or its default when absent or None. */
function arg<V>(c: VerlCase, name: string, fallback: V): V {
  return given(c.kwargs[name]) ? (c.kwargs[name] as V) : fallback;
}

/** A parameter verl's function has no default for. */
function requiredArg<V>(c: VerlCase, name: string): V {
  if (!given(c.kwargs[name]))
    throw new Error(`${c.function.split('.').pop()}() missing 1 required positional argument: '${name}'`);
  return c.kwargs[name] as V;
}

/** A field of the config object the function reads (`config.<path>`), or the config class's default. */
function config<V>(c: VerlCase, path: string, fallback: V): V {
  const value = field(c, `config.${path}`);
  return given(value) ? (value as V) : fallback;
}

/** Functions that `assert config is not None` refuse a case without one. */
function requireConfig(c: VerlCase, what: string): void {
  if (!given(field(c, 'config')))
    throw new Error(`${c.function.split('.').pop()}: verl asserts config is not None (${what})`);
}

/** The lenient lookup of the composed pipeline case, whose kwargs are flat: plain, config.* or config.policy_loss.*. */
function kwarg<V>(c: VerlCase, name: string, fallback: V): V {
  const value = [c.kwargs[name], field(c, `config.${name}`), field(c, `config.policy_loss.${name}`)].find(given);
  return value === undefined ? fallback : (value as V);
}

function input<V>(c: VerlCase, ...names: string[]): V {
  for (const name of names) if (c.inputs[name] !== undefined) return c.inputs[name] as V;
  throw new Error(`case ${c.id ?? c.function}: input ${names.join(' / ')} is missing`);
}

/** verl's optional rollout_is_weights argument (policy losses, the optimal token baselines); None is absent. */
function rolloutIsWeightsInput(c: VerlCase): Matrix | undefined {
  return given(c.inputs.rollout_is_weights) ? (c.inputs.rollout_is_weights as Matrix) : undefined;
}

/** v0.2's trainer slices the response columns off the whole attention mask (prompt + response). */
function responseColumns(mask: Matrix, T: number): Matrix {
  return mask[0].length > T ? mask.map((row) => row.slice(row.length - T)) : mask;
}

/** agg_loss's keyword arguments from `info` (agg_loss's own kwargs, or a policy loss's config.global_batch_info), as
 *  the case's version reads them. */
function aggOptions(c: VerlCase, lossAggMode: string, info: Fields): AggOptions {
  const count = (key: string) => (given(info[key]) ? Number(info[key]) : undefined);
  const options = {
    lossAggMode,
    dpSize: count('dp_size'),
    batchNumTokens: count('batch_num_tokens'),
    globalBatchSize: count('global_batch_size'),
    lossScaleFactor: count('loss_scale_factor'),
  };
  const version = behaviour(c);
  if (version.dpNeedsGlobalNormaliser && (options.dpSize ?? 1) > 1) {
    if (lossAggMode === 'token-mean' && options.batchNumTokens === undefined)
      throw new Error('(global) batch_num_tokens is required when dp_size > 1');
    if (lossAggMode.startsWith('seq-mean') && options.globalBatchSize === undefined)
      throw new Error('global_batch_size is required when dp_size > 1');
  }
  if (lossAggMode === 'token-sum' && !version.seqMeanTokenSumNormPerBatch)
    throw new Error(`Invalid loss_agg_mode: ${lossAggMode} (verl ${version.label} has no token-sum)`);
  // b178a3cd's seq-mean-token-sum-norm summed every sequence and divided by loss_scale_factor alone.
  if (lossAggMode === 'seq-mean-token-sum-norm' && !version.seqMeanTokenSumNormPerBatch)
    return { ...options, dpSize: 1, globalBatchSize: 1 };
  return options;
}

/** The policy-loss settings, read by `read` (config fields for verl's functions, flat kwargs for the pipeline). */
function policyOptions(read: <V>(name: string, fallback: V) => V, lossMode: string): PolicyLossOptions {
  const clipRatio = read('clip_ratio', 0.2);
  const optional = (name: string): number | undefined => read<number | undefined>(name, undefined);
  return {
    lossMode,
    clipRatio,
    clipRatioLow: read('clip_ratio_low', clipRatio),
    clipRatioHigh: read('clip_ratio_high', clipRatio),
    // DPPO reads config.get("clip_ratio_c", 20.0): a config without the field gets 20 (ActorConfig's is 3.0).
    clipRatioC: read('clip_ratio_c', lossMode.startsWith('dppo') ? 20.0 : 3.0),
    tauPos: optional('tau_pos'),
    tauNeg: optional('tau_neg'),
    clipCovRatio: optional('policy_loss.clip_cov_ratio'),
    clipCovLb: optional('policy_loss.clip_cov_lb'),
    clipCovUb: optional('policy_loss.clip_cov_ub'),
    klCovRatio: optional('policy_loss.kl_cov_ratio'),
    ppoKlCoef: optional('policy_loss.ppo_kl_coef'),
    droBeta: read<number | null>('policy_loss.dro_beta', null),
  };
}

/** A policy loss's config fields: ActorConfig's, with policy_loss.* nested, as verl's functions read them. */
function actorConfigReader(c: VerlCase) {
  return <V>(name: string, fallback: V): V => {
    // kl_cov falls back to 1.0 for an explicit None, not to PolicyLossConfig's 0.1.
    if (name === 'policy_loss.ppo_kl_coef' && field(c, 'config.policy_loss.ppo_kl_coef') === null) return 1.0 as V;
    return config(c, name, fallback);
  };
}

/**
 * The loss mode a policy-loss case names: compute_policy_loss_<mode>, get_policy_loss_fn('<mode>') or its name kwarg.
 */
function policyLossMode(c: VerlCase, name: string): string | null {
  if (c.function.includes('get_policy_loss_fn')) {
    const quoted = /get_policy_loss_fn\(\s*['"]([^'"]+)['"]/.exec(c.function)?.[1];
    return String(c.kwargs.name ?? c.kwargs.loss_mode ?? quoted ?? kwarg(c, 'loss_mode', 'vanilla'));
  }
  const mode = /^compute_policy_loss_(\w+)$/.exec(name)?.[1];
  return mode ?? null;
}

/** Policy losses that never read their loss_agg_mode (so never refuse a bad one): gspo and sapo aggregate as
 *  seq-mean-token-mean, geo_mean takes a plain mean over sequences (the table's fixedAggregation). */
function fixedAggregation(mode: string): string | undefined {
  return lossModeSpec(mode)?.fixedAggregation;
}

/** verl's POLICY_LOSS_REGISTRY at the case's version: the names get_policy_loss_fn finds. */
function policyLossRegistry(c: VerlCase): readonly string[] {
  const later = VERL_VERSIONS[NEWEST_VERL].newPolicyLosses.filter((m) => !behaviour(c).newPolicyLosses.includes(m));
  return [...POLICY_LOSS_MODES.filter((mode) => !later.includes(mode)), 'bypass_mode'];
}

/** v0.2's compute_policy_loss has no dual clip: a bound no loss reaches. */
const NO_DUAL_CLIP = 3e38;

/** v0.2 takes the ratio unclamped where the kernel clamps the log-ratio at ±20 (verl main's stability clamp): past
 *  that the numbers would differ, so such a case is refused rather than answered. */
function checkUnclampedRatio(oldLogProb: Matrix, logProb: Matrix, mask: Matrix): void {
  mask.forEach((row, b) =>
    row.forEach((m, t) => {
      if (m !== 0 && Math.abs(logProb[b][t] - oldLogProb[b][t]) > 20) {
        throw new Error(
          `v0.2 compute_policy_loss: log-ratio ${logProb[b][t] - oldLogProb[b][t]} at [${b}, ${t}] is beyond ±20, ` +
            `where v0.2's unclamped ratio is not supported (the kernel clamps as verl main does)`,
        );
      }
    }),
  );
}

/** kl_penalty's estimators per version. b178a3cd passes a "+" name unstripped to kl_penalty_forward, which raises
 *  for it; 1dda039b strips the "+" (the estimator's value, the straight-through k2 gradient the kernel computes). */
const KL_NAMES: Record<'main' | 'v02', readonly string[]> = {
  main: ['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3'],
  v02: ['kl', 'abs', 'mse', 'low_var_kl'],
};

function verlKlName(c: VerlCase, name: string): string {
  const version = behaviour(c);
  const known = KL_NAMES[verlVersion(c) === 'v02' ? 'v02' : 'main'];
  const base = version.klPlusNames && name.endsWith('+') ? name.slice(0, -1) : name;
  if (!known.includes(base)) {
    throw new Error(
      `kl_penalty="${name}": verl ${version.label} raises NotImplementedError (it knows ${known.join(', ')}` +
        `${name.endsWith('+') && !version.klPlusNames ? '; it hands a "+" name to kl_penalty_forward unstripped' : ''})`,
    );
  }
  return name;
}

/**
 * A key of verl's config.policy_loss.rollout_correction (bypass mode's settings), or the combined function's own
 * argument.
 */
function rolloutCorrectionKwarg<V>(c: VerlCase, name: string, fallback: V): V {
  const value = field(c, `config.policy_loss.rollout_correction.${name}`);
  return given(value) ? (value as V) : arg(c, name, fallback);
}

/**
 * rollout_rs and rollout_rs_threshold parsed (`fallback`: the options when the case gives none; null: no rejection).
 */
function rolloutRsKwargs(c: VerlCase, fallback: string | null): BypassCorrectionPlan['rolloutRs'] {
  const options = rolloutCorrectionKwarg<string | null>(c, 'rollout_rs', fallback);
  const threshold = rolloutCorrectionKwarg<string | number | null>(c, 'rollout_rs_threshold', null);
  if (options !== null && threshold === null)
    throw new Error("rollout_rs_threshold must be provided for rejection sampling (verl's ValueError)");
  return options === null ? null : parseRolloutRs(options, threshold === null ? null : String(threshold));
}

/** compute_rollout_correction_weights refuses levels other than token and sequence. */
function rolloutIsLevel(level: unknown): 'token' | 'sequence' {
  if (level !== 'token' && level !== 'sequence')
    throw new Error(`Invalid rollout_is: ${String(level)}. Must be one of {'token', 'sequence'}.`);
  return level;
}

/** Bypass mode's settings, with the defaults of verl's compute_policy_loss_bypass_mode and of
 *  compute_rollout_correction_and_rejection_mask (no weights, no rejection). */
function bypassPlan(c: VerlCase): BypassCorrectionPlan {
  const is = rolloutCorrectionKwarg<string | null>(c, 'rollout_is', null);
  const lossType = rolloutCorrectionKwarg(c, 'loss_type', 'ppo_clip');
  if (lossType !== 'ppo_clip' && lossType !== 'reinforce')
    throw new Error(`Invalid loss_type: ${lossType}. Must be 'reinforce' or 'ppo_clip'.`);
  return {
    lossType,
    rolloutIs:
      is === null
        ? null
        : {
            level: rolloutIsLevel(is),
            threshold: rolloutCorrectionKwarg<number | string>(c, 'rollout_is_threshold', 2.0),
            batchNormalize: rolloutCorrectionKwarg(c, 'rollout_is_batch_normalize', false),
            metricsFromAppliedWeights: behaviour(c).isMetricsFromAppliedWeights,
          },
    rolloutRs: rolloutRsKwargs(c, null),
  };
}

function controllerFrom(config: Record<string, unknown>): KLController {
  return getKlController({
    type: String(config.type),
    kl_coef: Number(config.kl_coef),
    target_kl: config.target_kl as number | undefined,
    horizon: config.horizon as number | undefined,
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
 *  verl.utils.reward_score.<module>.<function>, or default_compute_score, routed by data_source as training routes it.
 *  */
function scoreFunction(c: VerlCase): CaseReward {
  const [module, name] = c.function.split('.').slice(-2);
  const formatScore = kwarg(c, 'format_score', 0);
  const score = kwarg(c, 'score', 1);
  const solution = (arg: (name: string) => unknown) => arg('solution_str') as string;
  const truth = (arg: (name: string) => unknown) => arg('ground_truth') as string;
  if (name === 'default_compute_score') {
    return (arg) =>
      computeScore(
        arg('data_source') as string,
        solution(arg),
        arg('ground_truth'),
        c.inputs.extra_info === undefined ? null : (arg('extra_info') as Record<string, unknown> | null),
      );
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
    const boxedFallback = behaviour(c).mathDapoBoxedFallback;
    return (arg) => mathDapo.computeScore(solution(arg), truth(arg), strictBoxVerify, pauseTokensIndex, boxedFallback);
  }
  if (module === 'rlla') {
    const extraInfo = (arg: (name: string) => unknown) =>
      (c.inputs.extra_info !== undefined ? arg('extra_info') : kwarg(c, 'extra_info', null)) as Record<
        string,
        unknown
      > | null;
    return (arg) => rlla.computeScore(solution(arg), truth(arg), extraInfo(arg));
  }
  if (module === 'qa_em') {
    // Search-R1's fork: compute_score_em / compute_score_subem over prompt + response.
    return (arg) =>
      qaEm.computeScoreSearchR1(
        solution(arg),
        arg('ground_truth') as { target: qaEm.GoldenAnswers },
        name === 'compute_score_subem',
        formatScore,
        score,
      );
  }
  if (module === 'search_r1_like_qa_em') {
    const scorer = name === 'compute_score_subem' ? qaEm.computeScoreSubem : qaEm.computeScore;
    return (arg) => scorer(solution(arg), arg('ground_truth') as { target: qaEm.GoldenAnswers }, formatScore, score);
  }
  throw new Error(
    `verl-case: no reward module ${module} (known: gsm8k, math, math_reward, math_dapo, rlla, search_r1_like_qa_em, qa_em, ` +
      `and reward_score.default_compute_score)`,
  );
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

/** verl function name → estimator, from the estimator table. */
const OUTCOME_FUNCTIONS: Record<string, string> = Object.fromEntries(
  ADV_ESTIMATOR_TABLE.map((e) => [e.verlFunction, e.name]),
);

/** GDPO's reward keys: with config, non_tensor_batch and batch, each of config.gdpo_reward_keys's scores (float32)
 *  and config.gdpo_reward_weights; without them, none (token_level_rewards alone), as verl falls back. */
function gdpoRewardKeys(c: VerlCase): { scores: number[][]; weights: number[] | null } | null {
  if (!given(field(c, 'config')) || !given(c.inputs.non_tensor_batch) || !given(c.inputs.batch)) return null;
  const keys = config<string[] | null>(c, 'gdpo_reward_keys', null);
  if (!keys || keys.length === 0)
    throw new Error(
      "GDPO requires 'algorithm.gdpo_reward_keys' listing the individual reward component keys returned by " +
        'compute_score',
    );
  const extra = c.inputs.non_tensor_batch as Record<string, unknown[]>;
  const scores = keys.map((key) => {
    if (!(key in extra))
      throw new Error(
        `GDPO reward key '${key}' not found in non_tensor_batch. Available keys: ${JSON.stringify(Object.keys(extra))}`,
      );
    return extra[key].map((v) => Math.fround(Number(v)));
  });
  return { scores, weights: config<number[] | null>(c, 'gdpo_reward_weights', null) };
}

/** The composed PPO step (apply_kl_penalty → compute_advantage(GAE) → actor loss + critic loss). At v0.2 and in
 *  Search-R1: critic/kl metrics, v0.2's GAE, v0.2's policy loss (no dual clip) with token means, and Search-R1's
 *  state masking — an info_mask/loss_mask input takes the retrieved tokens out of the KL in the reward and the actor's
 *  loss, while GAE's whitening and the critic keep the response mask. */
async function runPipeline(engine: Engine, c: VerlCase): Promise<Outputs> {
  const v02 = verlVersion(c) === 'v02';
  const T = shapeOf('token_level_scores', input(c, 'token_level_scores')).T;
  const mask = responseColumns(input<Matrix>(c, 'response_mask', 'eos_mask', 'attention_mask'), T);
  const stateMask = (c.inputs.loss_mask ?? c.inputs.info_mask ?? c.inputs.state_mask) as Matrix | undefined;
  const kl = await applyKlPenalty(engine, {
    tokenLevelScores: input(c, 'token_level_scores'),
    oldLogProbs: input(c, 'old_log_probs'),
    refLogProb: input(c, 'ref_log_prob'),
    responseMask: v02 && isSearchR1(c) && c.inputs.info_mask ? responseColumns(c.inputs.info_mask as Matrix, T) : mask,
    klCtrl: controllerFrom({
      type: kwarg(c, 'kl_ctrl_type', 'fixed'),
      kl_coef: kwarg(c, 'kl_coef', 0.001),
      target_kl: kwarg(c, 'target_kl', undefined),
      horizon: kwarg(c, 'horizon', undefined),
    }),
    klPenalty: verlKlName(c, kwarg(c, 'kl_penalty', 'kl')),
  });
  const gaeArgs = {
    tokenLevelRewards: kl.tokenLevelRewards,
    values: input<Matrix>(c, 'values'),
    gamma: kwarg(c, 'gamma', 1),
    lam: kwarg(c, 'lam', 1),
  };
  const gae = v02
    ? await computeGaeAdvantageReturnV02(engine, { ...gaeArgs, eosMask: mask })
    : await computeGaeAdvantageReturn(engine, { ...gaeArgs, responseMask: mask });
  const agg = v02
    ? { lossAggMode: 'token-mean' }
    : aggOptions(c, kwarg(c, 'loss_agg_mode', 'token-mean'), {
        ...kwarg<Fields>(c, 'global_batch_info', {}),
        ...c.kwargs,
      });
  const useKlLoss = kwarg(c, 'use_kl_loss', true);
  const actorMask = v02 && stateMask ? responseColumns(stateMask, T) : mask;
  const actor = await computeActorLossFromLogits(engine, {
    logits: input(c, 'logits'),
    responses: input(c, 'responses'),
    oldLogProb: input(c, 'old_log_probs'),
    advantages: gae.advantages,
    responseMask: actorMask,
    entropyCoeff: kwarg(c, 'entropy_coeff', 0),
    refLogProb: useKlLoss ? input(c, 'ref_log_prob') : undefined,
    klLossCoef: kwarg(c, 'kl_loss_coef', 0.001),
    klLossType: useKlLoss ? verlKlName(c, kwarg(c, 'kl_loss_type', 'low_var_kl')) : 'low_var_kl',
    ...(v02
      ? { lossMode: 'vanilla', clipRatio: kwarg(c, 'clip_ratio', 0.2), clipRatioC: NO_DUAL_CLIP }
      : policyOptions((name, fallback) => kwarg(c, name, fallback), kwarg(c, 'loss_mode', 'vanilla'))),
    ...agg,
  });
  if (v02) checkUnclampedRatio(input(c, 'old_log_probs'), actor.logProb, actorMask);
  const critic = await computeValueLoss(engine, {
    vpreds: input(c, 'vpreds'),
    returns: gae.returns,
    values: input(c, 'values'),
    responseMask: mask,
    cliprangeValue: kwarg(c, 'cliprange_value', 0.5),
    ...agg,
  });
  const klMetrics = v02
    ? {
        'critic/kl': kl.metrics['actor/reward_kl_penalty'],
        'critic/kl_coeff': kl.metrics['actor/reward_kl_penalty_coeff'],
      }
    : kl.metrics;
  const pgMetrics = v02
    ? { 'actor/pg_clipfrac': actor.metrics['actor/pg_clipfrac'], 'actor/ppo_kl': actor.metrics['actor/ppo_kl'] }
    : actor.metrics;
  return {
    token_level_rewards: kl.tokenLevelRewards,
    kl_metrics: klMetrics,
    advantages: gae.advantages,
    returns: gae.returns,
    log_prob: actor.logProb,
    entropy: actor.entropy,
    pg_loss: actor.pgLoss,
    pg_metrics: pgMetrics,
    entropy_agg: actor.entropyAgg,
    kl_loss: actor.klLoss,
    policy_loss: actor.policyLoss,
    grad_logits_of_policy_loss: actor.gradLogits,
    vf_loss: critic.vfLoss,
    vf_clipfrac: critic.vfClipfrac,
    grad_vpreds_of_vf_loss: critic.gradVpreds,
  };
}

const ROLLOUT_CORR_PREFIX = 'rollout_corr/';

/** verl's rollout_corr_helper functions (host arithmetic, ppo/algorithm/rollout-correction.ts): their outputs under
 *  the names of their return statements, metrics without the rollout_corr/ prefix except where verl adds it. */
function rolloutCorrectionRoute(c: VerlCase, name: string): Outputs | null {
  const mask = () => input<Matrix>(c, 'response_mask');
  const flat = (m: Matrix) => Float32Array.from(m.flat());
  const unprefixed = (metrics: Record<string, number>) =>
    Object.fromEntries(Object.entries(metrics).map(([k, v]) => [k.replace(ROLLOUT_CORR_PREFIX, ''), v]));
  switch (name) {
    case 'compute_rollout_correction_weights': {
      const logRatio = input<Matrix>(c, 'log_ratio');
      const { B, T } = shapeOf('log_ratio', logRatio);
      const r = rolloutIsWeights(
        flat(logRatio),
        new Float32Array(B * T),
        flat(mask()),
        B,
        T,
        rolloutIsLevel(arg(c, 'rollout_is', 'token')),
        arg<number | string>(c, 'rollout_is_threshold', 2.0),
        arg(c, 'rollout_is_batch_normalize', false),
        behaviour(c).isMetricsFromAppliedWeights,
      );
      return { rollout_is_weights: toMatrix(r.weights, B, T), metrics: unprefixed(r.metrics) };
    }
    case 'compute_rollout_rejection_mask': {
      const logRatio = input<Matrix>(c, 'log_ratio');
      const { B, T } = shapeOf('log_ratio', logRatio);
      const r = rolloutRejectionMask(
        flat(logRatio),
        new Float32Array(B * T),
        flat(mask()),
        B,
        T,
        rolloutRsKwargs(c, 'token_k1')!,
      );
      return { modified_response_mask: toMatrix(r.mask, B, T), metrics: unprefixed(r.metrics) };
    }
    case 'compute_offpolicy_metrics': {
      const old = input<Matrix>(c, 'old_log_prob');
      const rollout = c.inputs.rollout_log_prob as Matrix | null | undefined;
      const { B, T } = shapeOf('old_log_prob', old);
      const metrics = unprefixed(rolloutMismatchMetrics(flat(old), flat(rollout ?? old), flat(mask()), B, T));
      // Without the rollout's log-probs verl reports the training policy's perplexity alone.
      return {
        metrics: rollout ? metrics : { training_ppl: metrics.training_ppl, training_log_ppl: metrics.training_log_ppl },
      };
    }
    case 'compute_rollout_corr_metrics_from_logprobs': {
      const current = input<Matrix>(c, 'log_prob');
      const { B, T } = shapeOf('log_prob', current);
      return { metrics: rolloutMismatchMetrics(flat(current), flat(input(c, 'rollout_log_prob')), flat(mask()), B, T) };
    }
    case 'compute_rollout_correction_and_rejection_mask': {
      const old = input<Matrix>(c, 'old_log_prob');
      const rollout = input<Matrix>(c, 'rollout_log_prob');
      const { B, T } = shapeOf('old_log_prob', old);
      // The same weights, rejection and drift metrics that bypass mode takes per micro-batch (its loss type aside).
      const r = bypassCorrection(bypassPlan(c), flat(old), flat(rollout), flat(mask()), B, T);
      return {
        rollout_is_weights: r.weights ? toMatrix(r.weights, B, T) : null,
        modified_response_mask: toMatrix(r.policyMask ?? flat(mask()), B, T),
        metrics: r.metrics,
      };
    }
  }
  return null;
}

/** get_kl_controller: verl main reads kl_ctrl (KLControlConfig's defaults); v0.2 reads config.critic.kl_ctrl but
 *  asserts on config.kl_ctrl.horizon, so its adaptive branch needs both. */
function klControllerRoute(c: VerlCase): Outputs {
  const v02 = verlVersion(c) === 'v02';
  if (!given(field(c, v02 ? 'config' : 'kl_ctrl')))
    throw new Error(`get_kl_controller() missing 1 required positional argument: '${v02 ? 'config' : 'kl_ctrl'}'`);
  const settings = {
    type: 'fixed',
    kl_coef: 0.001,
    horizon: 10000,
    target_kl: 0.1,
    ...(field(c, v02 ? 'config.critic.kl_ctrl' : 'kl_ctrl') as Fields | undefined),
  };
  let controller: KLController;
  if (settings.type === 'fixed') {
    controller = new FixedKLController(Number(settings.kl_coef));
  } else if (settings.type === 'adaptive') {
    const asserted = v02 ? field(c, 'config.kl_ctrl.horizon') : settings.horizon;
    if (v02 && asserted === undefined)
      throw new Error(
        'get_kl_controller: verl v0.2 asserts config.kl_ctrl.horizon > 0 and the case has no config.kl_ctrl (verl: ' +
          "missing key 'kl_ctrl')",
      );
    if (!(Number(asserted) > 0)) throw new Error(`horizon must be larger than 0. Got ${String(settings.horizon)}`);
    controller = new AdaptiveKLController(
      Number(settings.kl_coef),
      Number(settings.target_kl),
      Number(settings.horizon),
    );
  } else {
    throw new Error(
      v02
        ? 'Unknown kl_ctrl type'
        : `get_kl_controller: verl raises NotImplementedError for kl_ctrl.type "${String(settings.type)}" (fixed or ` +
            `adaptive)`,
    );
  }
  const outputs: Outputs = { value: controller.value };
  if (controller instanceof AdaptiveKLController)
    Object.assign(outputs, { target: controller.target, horizon: controller.horizon });
  const kls = c.inputs.current_kl_seq as number[] | undefined;
  if (kls) {
    const steps = input<number[]>(c, 'n_steps_seq');
    outputs.value_after_each_update = kls.map((kl, i) => {
      controller.update(kl, steps[i]);
      return controller.value;
    });
  }
  return outputs;
}

/** ray_trainer.compute_advantage: the estimator adv_estimator names, called as the trainer calls it — GAE with gamma
 *  and lam, GRPO with norm_adv_by_std_in_grpo, every other with config (and uid, reward_baselines, sum_pi_squared
 *  when the batch holds them); v0.2 knows gae, grpo, reinforce_plus_plus (gamma) and remax. */
async function computeAdvantageRoute(engine: Engine, c: VerlCase): Promise<Outputs> {
  const v02 = verlVersion(c) === 'v02';
  const estimator = String(requiredArg(c, 'adv_estimator'))
    .replace(/^AdvantageEstimator\./, '')
    .toLowerCase();
  const rewards = input<Matrix>(c, 'token_level_rewards');
  const T = shapeOf('token_level_rewards', rewards).T;
  const mask = responseColumns(input<Matrix>(c, 'response_mask', 'attention_mask', 'eos_mask'), T);
  const optional = (...names: string[]) =>
    Object.fromEntries(names.filter((n) => c.inputs[n] !== undefined).map((n) => [n, c.inputs[n]]));
  const index = c.inputs.uid ?? c.inputs.index;
  const call = (fn: string, kwargs: Fields, inputs: Fields) =>
    runVerlCase(engine, {
      ...c,
      function: `verl.trainer.ppo.core_algos.${fn}`,
      kwargs,
      inputs: { token_level_rewards: rewards, [v02 ? 'eos_mask' : 'response_mask']: mask, ...inputs },
    });
  const gamma = arg(c, 'gamma', 1.0);
  if (estimator === 'gae') {
    if (!v02 && config(c, 'use_pf_ppo', false))
      throw new Error(
        'compute_advantage: config.use_pf_ppo (compute_pf_ppo_reweight_data after GAE) is not supported here',
      );
    return call('compute_gae_advantage_return', { gamma, lam: arg(c, 'lam', 1.0) }, { values: input(c, 'values') });
  }
  if (estimator === 'grpo')
    return call(
      'compute_grpo_outcome_advantage',
      v02 ? {} : { norm_adv_by_std_in_grpo: arg(c, 'norm_adv_by_std_in_grpo', true) },
      { index },
    );
  if (v02) {
    if (estimator === 'reinforce_plus_plus')
      return call('compute_reinforce_plus_plus_outcome_advantage', { gamma }, {});
    if (estimator === 'remax') return call('compute_remax_outcome_advantage', {}, optional('reward_baselines'));
    throw new Error(
      `compute_advantage: verl v0.2 raises NotImplementedError for adv_estimator ${estimator} (gae, grpo, ` +
        `reinforce_plus_plus, remax)`,
    );
  }
  const fn = Object.keys(OUTCOME_FUNCTIONS).find((key) => OUTCOME_FUNCTIONS[key] === estimator);
  if (!fn) throw new Error(`Unknown advantage estimator simply: ${estimator}`);
  // The trainer passes config always, None included: a function without that parameter refuses it.
  const configKwargs = Object.fromEntries(
    Object.entries(c.kwargs).filter(([key]) => key === 'config' || key.startsWith('config.')),
  );
  return call(fn, Object.keys(configKwargs).length ? configKwargs : { config: null }, {
    ...(index === undefined ? {} : { index }),
    ...optional('reward_baselines', 'sum_pi_squared', 'old_log_probs', 'rollout_is_weights'),
    ...(estimator === 'gdpo' ? optional('non_tensor_batch', 'batch') : {}),
  });
}

export async function runVerlCase(engine: Engine, c: VerlCase): Promise<Outputs> {
  const fn = c.function;
  const name = fn.split('.').pop()!;
  if (fn.includes(' -> ')) return runPipeline(engine, c);
  const version = verlVersion(c);
  const v02 = version === 'v02';
  checkVerlSignature(
    fn.startsWith('verl.utils.torch_functional.masked_')
      ? 'masked_stats'
      : fn.includes('get_policy_loss_fn')
        ? 'get_policy_loss_fn'
        : name,
    version,
    c.kwargs,
    { module: fn.includes('core_algos') ? 'core_algos' : fn, searchR1: isSearchR1(c) },
  );
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
  // v0.2's logprobs_of_labels_v2 asserts float32 logits, which the float64 recordings are not.
  if (name === 'logprobs_of_labels_v2' && c.dtype !== 'float32') {
    throw new Error(
      'Using bf16 logits with logprobs_of_labels_v2 may lead to divergence (verl v0.2 asserts float32 logits; this ' +
        "case's are float64)",
    );
  }
  switch (name) {
    case 'entropy_from_logits':
    case 'entropy_from_logits_with_chunking': {
      // Logits (..., V): with_chunking's are (N, V) rows, taken here as one sequence of N positions.
      const given3d = input<number[][] | number[][][]>(c, 'logits');
      const rows = !Array.isArray(given3d[0][0]);
      const logits = rows ? [given3d as number[][]] : (given3d as number[][][]);
      const ones = logits.map((row) => row.map(() => 1));
      const entropy = (await logprobsAndEntropyFromLogits(engine, logits, null)).entropy;
      const grad = await logitsBackward(engine, logits, null, null, ones);
      return { entropy: rows ? entropy[0] : entropy, grad_logits_of_sum_entropy: rows ? grad[0] : grad };
    }
    case 'logprobs_of_labels_v2':
    case 'logprobs_from_logits':
    case 'logprobs_from_logits_naive':
    case 'logprobs_from_logits_v2': {
      const logits = input<number[][][]>(c, 'logits');
      const labels = input<Matrix>(c, 'labels');
      const ones = labels.map((row) => row.map(() => 1));
      return {
        logprobs: (await logprobsAndEntropyFromLogits(engine, logits, labels)).logProb,
        grad_logits_of_sum_logprobs: await logitsBackward(engine, logits, labels, ones, null),
      };
    }
    case 'kl_penalty':
    case 'kl_penalty_forward': {
      const { kl, grad } = await klPenalty(
        engine,
        input(c, 'logprob'),
        input(c, 'ref_logprob'),
        verlKlName(c, requiredArg(c, 'kl_penalty')),
      );
      return { kl, grad_logprob_of_sum: grad };
    }
    case 'update': {
      const controller: KLController = fn.includes('Adaptive')
        ? new AdaptiveKLController(kwarg(c, 'init_kl_coef', 0), kwarg(c, 'target_kl', 0), kwarg(c, 'horizon', 0))
        : new FixedKLController(kwarg(c, 'kl_coef', 0));
      const kls = input<number[]>(c, 'current_kl_seq');
      const steps = input<number[]>(c, 'n_steps_seq');
      return {
        value_after_each_update: kls.map((kl, i) => {
          controller.update(kl, steps[i]);
          return controller.value;
        }),
      };
    }
    case 'get_kl_controller':
      return klControllerRoute(c);
    case 'apply_kl_penalty': {
      // verl main reads response_mask; v0.2 the response columns of attention_mask, and Search-R1 its info_mask first.
      const scores = input<Matrix>(c, 'token_level_scores');
      const T = shapeOf('token_level_scores', scores).T;
      const maskNames = !v02
        ? ['response_mask', 'attention_mask']
        : isSearchR1(c)
          ? ['info_mask', 'attention_mask', 'response_mask']
          : ['attention_mask', 'response_mask'];
      const klCtrl = controllerFrom(arg(c, 'kl_ctrl', {}));
      const old = input<Matrix>(c, 'old_log_probs');
      // v0.2 without ref_log_prob: no KL (β = 0), and the controller still sees a current_kl of 0.
      const withoutRef = v02 && c.inputs.ref_log_prob === undefined;
      const r = await applyKlPenalty(engine, {
        tokenLevelScores: scores,
        oldLogProbs: old,
        refLogProb: withoutRef ? old : input(c, 'ref_log_prob'),
        responseMask: responseColumns(input(c, ...maskNames), T),
        klCtrl,
        klPenalty: verlKlName(c, arg(c, 'kl_penalty', 'kl')),
      });
      const metrics = v02
        ? {
            'critic/kl': r.metrics['actor/reward_kl_penalty'],
            'critic/kl_coeff': withoutRef ? 0 : r.metrics['actor/reward_kl_penalty_coeff'],
          }
        : r.metrics;
      return { token_level_rewards: r.tokenLevelRewards, metrics, kl_ctrl_value_after: klCtrl.value };
    }
    case 'compute_advantage':
      return computeAdvantageRoute(engine, c);
    case 'compute_gae_advantage_return': {
      const args = {
        tokenLevelRewards: input<Matrix>(c, 'token_level_rewards'),
        values: input<Matrix>(c, 'values'),
        gamma: requiredArg<number>(c, 'gamma'),
        lam: requiredArg<number>(c, 'lam'),
      };
      const r = v02
        ? await computeGaeAdvantageReturnV02(engine, { ...args, eosMask: input(c, 'eos_mask', 'response_mask') })
        : await computeGaeAdvantageReturn(engine, { ...args, responseMask: input(c, 'response_mask', 'eos_mask') });
      return { advantages: r.advantages, returns: r.returns };
    }
    case 'agg_loss': {
      const r = await aggLoss(
        engine,
        input(c, 'loss_mat'),
        input(c, 'loss_mask'),
        aggOptions(c, requiredArg(c, 'loss_agg_mode'), c.kwargs),
      );
      return { loss: r.loss };
    }
    case 'compute_value_loss': {
      // v0.2: masked_mean, which is token-mean; b178a3cd: agg_loss with local normalisers.
      const r = await computeValueLoss(engine, {
        vpreds: input(c, 'vpreds'),
        returns: input(c, 'returns'),
        values: input(c, 'values'),
        responseMask: input(c, 'response_mask', 'eos_mask'),
        cliprangeValue: requiredArg(c, 'cliprange_value'),
        ...aggOptions(c, arg(c, 'loss_agg_mode', 'token-mean'), behaviour(c).valueLossTakesGlobalInfo ? c.kwargs : {}),
      });
      return { vf_loss: r.vfLoss, vf_clipfrac: r.vfClipfrac, grad_vpreds: r.gradVpreds };
    }
    case 'compute_entropy_loss': {
      const r = await computeEntropyLoss(engine, input(c, 'logits'), input(c, 'response_mask', 'eos_mask'), {
        lossAggMode: arg(c, 'loss_agg_mode', 'token-mean'),
      });
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
      const bound = (v: unknown, b: number, t: number): number =>
        Array.isArray(v) ? (Array.isArray(v[0]) ? v[b][t] : v[t]) : (v as number);
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
      const weights = pfPpoWeights(scores, arg(c, 'reweight_method', 'pow'), arg(c, 'weight_pow', 2.0));
      return {
        weights: Array.from(weights),
        ...(c.seed === undefined
          ? {}
          : { sample_indices: drawWithReplacement(weights, scores.length, new Rng(c.seed)) }),
      };
    }
    case 'compute_rewards': {
      const r = await computeRewards(engine, {
        tokenLevelScores: input(c, 'token_level_scores'),
        oldLogProb: input(c, 'old_log_prob', 'old_log_probs'),
        refLogProb: input(c, 'ref_log_prob'),
        klRatio: requiredArg(c, 'kl_ratio'),
      });
      return { rewards: r, token_level_rewards: r, output: r };
    }
  }
  const correction = rolloutCorrectionRoute(c, name);
  if (correction) return correction;
  if (name === 'compute_policy_loss') {
    const oldLogProb = input<Matrix>(c, 'old_log_prob');
    const logProb = input<Matrix>(c, 'log_prob');
    const responseMask = input<Matrix>(c, 'response_mask', 'eos_mask');
    const args = { oldLogProb, logProb, advantages: input<Matrix>(c, 'advantages'), responseMask, lossMode: 'vanilla' };
    if (v02) {
      // v0.2: (pg_loss, pg_clipfrac, ppo_kl) of the plain clipped objective, masked_mean-aggregated.
      checkUnclampedRatio(oldLogProb, logProb, responseMask);
      const r = await computePolicyLoss(engine, {
        ...args,
        clipRatio: requiredArg<number>(c, 'cliprange'),
        clipRatioC: NO_DUAL_CLIP,
        lossAggMode: 'token-mean',
      });
      return {
        pg_loss: r.pgLoss,
        pg_clipfrac: r.metrics['actor/pg_clipfrac'],
        ppo_kl: r.metrics['actor/ppo_kl'],
        grad_log_prob: r.gradLogProb,
      };
    }
    // verl main's deprecated form: keyword clip ranges (cliprange has no value of its own), dual clip, 4 outputs.
    const cliprange = arg<number | null>(c, 'cliprange', null);
    const low = arg(c, 'cliprange_low', cliprange);
    const high = arg(c, 'cliprange_high', cliprange);
    if (low === null || high === null)
      throw new Error(
        "compute_policy_loss: cliprange is None and so is a cliprange_low/high: verl's clamp(ratio, 1 - None, …) " +
          "raises TypeError: unsupported operand type(s) for -: 'int' and 'NoneType'",
      );
    const r = await computePolicyLoss(engine, {
      ...args,
      clipRatioLow: low,
      clipRatioHigh: high,
      clipRatioC: arg(c, 'clip_ratio_c', 3.0),
      lossAggMode: arg(c, 'loss_agg_mode', 'token-mean'),
    });
    return {
      pg_loss: r.pgLoss,
      pg_clipfrac: r.metrics['actor/pg_clipfrac'],
      ppo_kl: r.metrics['actor/ppo_kl'],
      pg_clipfrac_lower: r.metrics['actor/pg_clipfrac_lower'],
      grad_log_prob: r.gradLogProb,
    };
  }
  const lossMode = policyLossMode(c, name);
  const registry = policyLossRegistry(c);
  if (fn.includes('get_policy_loss_fn') && !registry.includes(lossMode!)) {
    throw new Error(`Unsupported loss mode: ${lossMode}. Supported modes are: ${registry.join(', ')}`);
  }
  if (name === 'compute_policy_loss_reinforce') {
    requireConfig(c, 'ActorConfig must be provided for REINFORCE loss');
    // verl's compute_policy_loss_reinforce: −A·log π·w, gpg's loss weighted by w.
    const r = await computePolicyLoss(engine, {
      oldLogProb: input(c, 'rollout_log_prob', 'old_log_prob'),
      logProb: input(c, 'log_prob'),
      responseMask: input(c, 'response_mask'),
      advantages: input(c, 'advantages'),
      rolloutIsWeights: rolloutIsWeightsInput(c),
      lossMode: 'gpg',
      ...aggOptions(c, arg(c, 'loss_agg_mode', 'seq-mean-token-sum'), config(c, 'global_batch_info', {})),
    });
    return { pg_loss: r.pgLoss, metrics: { 'actor/ppo_kl': r.metrics['actor/ppo_kl'] }, grad_log_prob: r.gradLogProb };
  }
  if (lossMode === 'bypass_mode') {
    requireConfig(c, 'config is required for bypass_mode loss');
    if (!given(field(c, 'config.policy_loss.rollout_correction'))) {
      throw new Error(
        "rollout_correction config not found in policy_loss. When using loss_mode='bypass_mode', ensure " +
          'rollout_correction config is passed.',
      );
    }
    const correction = bypassPlan(c);
    // rollout_is_weights, if given, is ignored: bypass mode computes its own against the current policy.
    const r = await computePolicyLossBypassMode(engine, {
      oldLogProb: input(c, 'old_log_prob'),
      logProb: input(c, 'log_prob'),
      advantages: input(c, 'advantages'),
      responseMask: input(c, 'response_mask'),
      correction,
      ...policyOptions(actorConfigReader(c), 'vanilla'),
      ...aggOptions(c, arg(c, 'loss_agg_mode', 'token-mean'), config(c, 'global_batch_info', {})),
    });
    const keys =
      correction.lossType === 'reinforce'
        ? ['actor/ppo_kl']
        : ['actor/pg_clipfrac', 'actor/ppo_kl', 'actor/pg_clipfrac_lower'];
    const rollout = Object.entries(r.metrics).filter(([k]) => k.startsWith('rollout_corr/'));
    return {
      pg_loss: r.pgLoss,
      metrics: { ...Object.fromEntries(keys.map((k) => [k, r.metrics[k]])), ...Object.fromEntries(rollout) },
      grad_log_prob: r.gradLogProb,
    };
  }
  if (lossMode) {
    requireConfig(c, 'an ActorConfig');
    const r = await computePolicyLoss(engine, {
      oldLogProb: input(c, 'old_log_prob'),
      logProb: input(c, 'log_prob'),
      advantages: input(c, 'advantages'),
      responseMask: input(c, 'response_mask', 'eos_mask'),
      rolloutIsWeights: rolloutIsWeightsInput(c),
      ...policyOptions(actorConfigReader(c), lossMode),
      ...aggOptions(
        c,
        fixedAggregation(lossMode) ?? arg(c, 'loss_agg_mode', 'token-mean'),
        config(c, 'global_batch_info', {}),
      ),
      seed: c.seed,
    });
    const keys = policyLossMetrics(lossMode);
    return {
      pg_loss: r.pgLoss,
      metrics: Object.fromEntries(keys.map((k) => [k, r.metrics[k]])),
      grad_log_prob: r.gradLogProb,
    };
  }
  const estimator = OUTCOME_FUNCTIONS[name];
  if (estimator === 'optimal_token_baseline' || estimator === 'tir_optimal_token_baseline') {
    // Without handle_zero_tail, each function's own default at the case's version.
    const r = await computeAdvantage(engine, estimator, {
      tokenLevelRewards: input(c, 'token_level_rewards'),
      responseMask: input(c, 'response_mask'),
      index: input(c, 'index'),
      oldLogProbs: input(c, 'old_log_probs'),
      sumPiSquared: input(c, 'sum_pi_squared'),
      rolloutIsWeights: rolloutIsWeightsInput(c),
      handleZeroTail: arg(c, 'handle_zero_tail', behaviour(c).otbHandleZeroTailDefault[estimator]),
      epsilon: arg(c, 'epsilon', 1e-8),
    });
    return { advantages: r.advantages, returns: r.returns };
  }
  if (estimator) {
    // Where each reads its settings: grpo's norm_adv_by_std_in_grpo is its own argument, grpo_passk's a config field
    // (its argument is overwritten); reinforce++ takes config.gamma (v0.2: a gamma argument).
    if (estimator === 'grpo_passk' || (estimator === 'reinforce_plus_plus' && !v02)) requireConfig(c, 'an AlgoConfig');
    const r = await computeAdvantage(engine, estimator, {
      tokenLevelRewards: input(c, 'token_level_rewards'),
      responseMask: input(c, 'response_mask', 'eos_mask'),
      index: estimator === 'reinforce_plus_plus' || estimator === 'remax' ? [] : input(c, 'index'),
      epsilon: arg(c, 'epsilon', 1e-6),
      normAdvByStdInGrpo:
        estimator === 'grpo_passk'
          ? config(c, 'norm_adv_by_std_in_grpo', true)
          : arg(c, 'norm_adv_by_std_in_grpo', true),
      gamma: estimator !== 'reinforce_plus_plus' ? 1 : v02 ? requiredArg<number>(c, 'gamma') : config(c, 'gamma', 1.0),
      rewardBaselines: estimator === 'remax' ? input(c, 'reward_baselines') : undefined,
      fNorm: arg(c, 'f_norm', 1),
      reinforcePlusPlusCarriesAcrossMask: behaviour(c).reinforcePlusPlusCarriesAcrossMask,
      rewardKeyScores: estimator === 'gdpo' ? gdpoRewardKeys(c) : null,
      grpoVectorizedVarianceFloor: behaviour(c).grpoVectorizedFloorsVarianceAtEpsilon ? arg(c, 'epsilon', 1e-6) : 0,
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
    console.error(
      `verl-case: ${path}: ${(error as Error).message} (expected one case as JSON: {function, kwargs, inputs})`,
    );
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
