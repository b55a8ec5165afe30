// The routes of tools/verl-case.ts for the verl functions its recorded sample does not hold: each new policy loss
// (compute_policy_loss_<mode> and get_policy_loss_fn('<mode>')), rollout correction's losses and helpers, the
// vectorized and GPG estimators, PF-PPO's weights, the reward modules and default_compute_score, clip_by_value and
// compute_rewards, checked against the float64 references (the kernels' .ref.ts, ppo/rewards/) or, for math_dapo,
// default_compute_score and math_reward, against values recorded from verl's own code; then what each verl version's
// signature changes (v0.2 and Search-R1 forms, rollout_is_weights, config-read settings, refusals), checked against
// numpy ports of verl's own functions. A wrong route, key or default shows; verl's numbers for the rest are in the
// full suite, which the
// sample test runs when it is given.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { expectClose } from '../support/arrays.ts';
import { runVerlCase, type VerlCase } from '../../tools/verl-case.ts';
import { computeActorLossRef } from '../../kernels/ppo/policy-loss.ref.ts';
import { computeOutcomeAdvantageRef } from '../../kernels/ppo/advantage-outcome.ref.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import { selectCovarianceTokens } from '../../kernels/ppo/covariance-selection.ts';
import { resolvePolicyLossConfig } from '../../ppo/algorithm/policy-loss-config.ts';
import {
  computeOptimalTokenBaselineRef,
  computeMultiTurnOptimalTokenBaselineRef,
} from '../../kernels/ppo/optimal-token-baseline.ref.ts';
import { groupLayout } from '../../kernels/ppo/advantage-outcome.ts';
import * as math from '../../ppo/rewards/math.ts';
import * as qaEm from '../../ppo/rewards/qa-em.ts';
import { klPenaltyRef } from '../../kernels/ppo/kl-penalty.ref.ts';
import { logprobEntropyBackwardRef, logprobEntropyRef } from '../../kernels/ppo/logprob-entropy.ref.ts';
import { GOLDENS } from '../support/verl-case-goldens.ts';

const B = 4;
const T = 5;
const MASK = [
  [1, 1, 1, 1, 1],
  [1, 1, 0, 0, 0],
  [1, 1, 1, 0, 0],
  [1, 0, 0, 0, 0],
];
const wave = (phase: number, scale: number, offset = 0) =>
  MASK.map((row, b) => row.map((_, t) => offset + scale * Math.sin(1.7 * b + 2.3 * t + phase)));
const OLD = wave(0, 0.3, -1);
const LOG_PROB = wave(1, 0.3, -1);
const ADVANTAGES = wave(2, 1.5);
const CORE = 'verl.trainer.ppo.core_algos';

describe('verl-case routes beyond the recorded sample', () => {
  const modes: [string, Record<string, unknown>][] = [
    ['gpg', {}],
    ['geo_mean', { 'config.clip_ratio': 0.1 }],
    ['cispo', { 'config.clip_ratio_low': 0.1, 'config.clip_ratio_high': 0.15 }],
    ['sapo', { 'config.tau_pos': 1, 'config.tau_neg': 1.5 }],
    [
      'clip_cov',
      {
        'config.policy_loss.clip_cov_ratio': 1,
        'config.policy_loss.clip_cov_lb': 0,
        'config.policy_loss.clip_cov_ub': 5,
      },
    ],
    ['kl_cov', { 'config.policy_loss.kl_cov_ratio': 0.2, 'config.policy_loss.ppo_kl_coef': 0.5 }],
    ['gspo', {}],
  ];
  for (const [mode, kwargs] of modes) {
    for (const fn of [`${CORE}.compute_policy_loss_${mode}`, `${CORE}.get_policy_loss_fn('${mode}')`]) {
      it(fn, async () => {
        const c: VerlCase = {
          function: fn,
          kwargs: { 'config.clip_ratio': 0.2, ...kwargs },
          inputs: { old_log_prob: OLD, log_prob: LOG_PROB, advantages: ADVANTAGES, response_mask: MASK },
        };
        const got = (await runVerlCase(await gpuEngine(), c)) as {
          pg_loss: number;
          metrics: Record<string, number>;
          grad_log_prob: number[][];
        };
        const k = (name: string) =>
          (kwargs[`config.${name}`] ?? kwargs[`config.policy_loss.${name}`]) as number | undefined;
        const config = resolvePolicyLossConfig({
          lossMode: mode,
          clipRatio: k('clip_ratio') ?? 0.2,
          clipRatioLow: k('clip_ratio_low'),
          clipRatioHigh: k('clip_ratio_high'),
          tauPos: k('tau_pos'),
          tauNeg: k('tau_neg'),
          clipCovRatio: k('clip_cov_ratio'),
          clipCovLb: k('clip_cov_lb'),
          clipCovUb: k('clip_cov_ub'),
          klCovRatio: k('kl_cov_ratio'),
          ppoKlCoef: k('ppo_kl_coef'),
        });
        const flat = {
          oldLogProb: OLD.flat(),
          logProb: LOG_PROB.flat(),
          advantages: ADVANTAGES.flat(),
          responseMask: MASK.flat(),
        };
        // clip_cov's pick here has at most clip_num candidates, so no random draw decides it.
        const selected =
          mode === 'clip_cov' || mode === 'kl_cov'
            ? selectCovarianceTokens(
                mode,
                {
                  ...flat,
                  clipRatioLow: config.clipRatioLow,
                  clipRatioHigh: config.clipRatioHigh,
                  clipCovRatio: config.clipCovRatio!,
                  clipCovLb: config.clipCovLb!,
                  clipCovUb: config.clipCovUb!,
                  klCovRatio: config.klCovRatio!,
                },
                (n) => Array.from({ length: n }, (_, i) => i),
              )
            : undefined;
        const expected = computeActorLossRef({
          ...flat,
          B,
          T,
          config,
          aggregation: localAggregation('token-mean', flat.responseMask, B, T),
          selected,
        });
        expectClose([got.pg_loss], [expected.pgLoss], 1e-6, 1e-5, 'pg_loss');
        expectClose(got.grad_log_prob.flat(), expected.gradLogProb, 1e-6, 1e-4, 'grad_log_prob');
        const keys = Object.keys(got.metrics);
        expect(keys).toEqual(
          mode === 'gpg'
            ? []
            : mode === 'kl_cov'
              ? ['actor/ppo_kl']
              : mode === 'clip_cov'
                ? ['actor/pg_clipfrac', 'actor/ppo_kl']
                : ['actor/pg_clipfrac', 'actor/ppo_kl', 'actor/pg_clipfrac_lower'],
        );
        if (keys.length)
          expectClose(
            keys.map((key) => got.metrics[key]),
            keys.map(
              (key) =>
                ({
                  'actor/pg_clipfrac': expected.pgClipfrac,
                  'actor/ppo_kl': expected.ppoKl,
                  'actor/pg_clipfrac_lower': expected.pgClipfracLower,
                })[key]!,
            ),
            1e-6,
            1e-5,
            'metrics',
          );
      });
    }
  }

  // Rollout correction's losses, worked from verl's formulas (core_algos.py:1984-2176): ratios of this sample span
  // about 0.55 to 1.8, so IS truncation at 1.2 and token_k1 bounds 0.8–1.25 both act.
  const flatMask = MASK.flat();
  const ratio = (b: number, t: number) => Math.exp(LOG_PROB[b][t] - OLD[b][t]);
  const tokens = flatMask.reduce((a, m) => a + m, 0);
  type LossOutput = { pg_loss: number; metrics: Record<string, number>; grad_log_prob: number[][] };

  it(`${CORE}.compute_policy_loss_reinforce: −A·log π·w, seq-mean-token-sum, ppo_kl against the rollout`, async () => {
    const weights = wave(3, 0.4, 1);
    const got = (await runVerlCase(await gpuEngine(), {
      function: `${CORE}.compute_policy_loss_reinforce`,
      kwargs: { 'config.global_batch_info': {} },
      inputs: {
        rollout_log_prob: OLD,
        log_prob: LOG_PROB,
        advantages: ADVANTAGES,
        response_mask: MASK,
        rollout_is_weights: weights,
      },
    })) as LossOutput;
    const rows = MASK.filter((row) => row.some((m) => m > 0)).length;
    const loss =
      MASK.reduce(
        (a, row, b) => a + row.reduce((s, m, t) => s - m * ADVANTAGES[b][t] * LOG_PROB[b][t] * weights[b][t], 0),
        0,
      ) / rows;
    expectClose([got.pg_loss], [loss], 1e-6, 1e-5, 'pg_loss');
    expectClose(
      got.grad_log_prob.flat(),
      MASK.flatMap((row, b) => row.map((m, t) => (-m * ADVANTAGES[b][t] * weights[b][t]) / rows)),
      1e-6,
      1e-4,
      'grad_log_prob',
    );
    const kl =
      MASK.reduce((a, row, b) => a + row.reduce((s, m, t) => s + m * (OLD[b][t] - LOG_PROB[b][t]), 0), 0) / tokens;
    expect(Object.keys(got.metrics)).toEqual(['actor/ppo_kl']);
    expect(got.metrics['actor/ppo_kl']).toBeCloseTo(kl, 5);
  });

  for (const lossType of ['reinforce', 'ppo_clip']) {
    it(
      `${CORE}.get_policy_loss_fn('bypass_mode') with loss_type=${lossType}, token IS and token_k1 ` + `rejection`,
      async () => {
        const got = (await runVerlCase(await gpuEngine(), {
          function: `${CORE}.get_policy_loss_fn('bypass_mode')`,
          kwargs: {
            config: {
              clip_ratio: 0.2,
              policy_loss: {
                rollout_correction: {
                  loss_type: lossType,
                  rollout_is: 'token',
                  rollout_is_threshold: 1.2,
                  rollout_rs: 'token_k1',
                  rollout_rs_threshold: '0.8_1.25',
                },
              },
            },
          },
          inputs: { old_log_prob: OLD, log_prob: LOG_PROB, advantages: ADVANTAGES, response_mask: MASK },
        })) as LossOutput;
        const kept: number[][] = MASK.map((row, b) =>
          row.map((m, t) => (m > 0 && ratio(b, t) >= 0.8 && ratio(b, t) <= 1.25 ? 1 : 0)),
        );
        const keptCount = kept.flat().reduce((a: number, k) => a + k, 0);
        expect(keptCount).toBeGreaterThan(2);
        expect(keptCount).toBeLessThan(tokens - 2);
        const w = (b: number, t: number) => Math.min(ratio(b, t), 1.2);
        if (lossType === 'reinforce') {
          // token-mean over the kept tokens: without global_batch_info, agg_loss counts the mask it is handed, the
          // rejection's.
          const loss =
            kept.reduce(
              (a, row, b) => a + row.reduce((s, k, t) => s - k * ADVANTAGES[b][t] * LOG_PROB[b][t] * w(b, t), 0),
              0,
            ) / keptCount;
          expectClose([got.pg_loss], [loss], 1e-6, 1e-5, 'pg_loss');
          expectClose(
            got.grad_log_prob.flat(),
            kept.flatMap((row, b) => row.map((k, t) => (-k * ADVANTAGES[b][t] * w(b, t)) / keptCount)),
            1e-6,
            1e-4,
            'grad_log_prob',
          );
        } else {
          // Vanilla PPO on the rollout's log-probs over the kept tokens; the IS weights are measured, not applied.
          const expected = computeActorLossRef({
            oldLogProb: OLD.flat(),
            logProb: LOG_PROB.flat(),
            advantages: ADVANTAGES.flat(),
            responseMask: kept.flat(),
            B,
            T,
            config: resolvePolicyLossConfig({ clipRatio: 0.2 }),
            aggregation: { ...localAggregation('token-mean', kept.flat(), B, T) },
          });
          expectClose(
            [got.pg_loss, got.metrics['actor/pg_clipfrac'], got.metrics['actor/ppo_kl']],
            [expected.pgLoss, expected.pgClipfrac, expected.ppoKl],
            1e-6,
            1e-5,
            'pg_loss, metrics',
          );
          expectClose(got.grad_log_prob.flat(), expected.gradLogProb, 1e-6, 1e-4, 'grad_log_prob');
        }
        // verl 1dda039b measures the applied (truncated) weights.
        const meanWeight = MASK.reduce((a, row, b) => a + row.reduce((s, m, t) => s + m * w(b, t), 0), 0) / tokens;
        expect(got.metrics['rollout_corr/rollout_is_mean']).toBeCloseTo(meanWeight, 5);
        expect(got.metrics['rollout_corr/rollout_rs_masked_fraction']).toBeCloseTo(1 - keptCount / tokens, 5);
        expect(got.metrics['rollout_corr/kl']).toBeCloseTo(
          MASK.reduce((a, row, b) => a + row.reduce((s, m, t) => s + m * (OLD[b][t] - LOG_PROB[b][t]), 0), 0) / tokens,
          5,
        );
      },
    );
  }

  const HELPER = 'verl.trainer.ppo.rollout_corr_helper';
  const logRatio = MASK.map((row, b) => row.map((_, t) => LOG_PROB[b][t] - OLD[b][t]));
  it(
    `${HELPER}.compute_rollout_correction_weights, compute_rollout_rejection_mask, compute_offpolicy_metrics: ` +
      `unprefixed metrics`,
    async () => {
      const engine = await gpuEngine();
      const weights = (await runVerlCase(engine, {
        function: `${HELPER}.compute_rollout_correction_weights`,
        kwargs: { rollout_is: 'token', rollout_is_threshold: 1.2 },
        inputs: { log_ratio: logRatio, response_mask: MASK },
      })) as { rollout_is_weights: number[][]; metrics: Record<string, number> };
      expectClose(
        weights.rollout_is_weights.flat(),
        MASK.flatMap((row, b) => row.map((m, t) => m * Math.min(ratio(b, t), 1.2))),
        1e-6,
        1e-5,
        'rollout_is_weights',
      );
      // verl 1dda039b measures the applied (truncated) weights, b178a3cd the raw ratios.
      expect(weights.metrics.rollout_is_mean).toBeCloseTo(
        MASK.reduce((a, row, b) => a + row.reduce((s, m, t) => s + m * Math.min(ratio(b, t), 1.2), 0), 0) / tokens,
        5,
      );
      const b178a3cd = (await runVerlCase(engine, {
        profile: 'head',
        function: `${HELPER}.compute_rollout_correction_weights`,
        kwargs: { rollout_is: 'token', rollout_is_threshold: 1.2 },
        inputs: { log_ratio: logRatio, response_mask: MASK },
      })) as { metrics: Record<string, number> };
      expect(b178a3cd.metrics.rollout_is_mean).toBeCloseTo(
        MASK.reduce((a, row, b) => a + row.reduce((s, m, t) => s + m * ratio(b, t), 0), 0) / tokens,
        5,
      );
      const rejected = (await runVerlCase(engine, {
        function: `${HELPER}.compute_rollout_rejection_mask`,
        kwargs: { rollout_rs: 'token_k1', rollout_rs_threshold: '0.8_1.25' },
        inputs: { log_ratio: logRatio, response_mask: MASK },
      })) as { modified_response_mask: number[][]; metrics: Record<string, number> };
      expect(rejected.modified_response_mask).toEqual(
        MASK.map((row, b) => row.map((m, t) => (m > 0 && ratio(b, t) >= 0.8 && ratio(b, t) <= 1.25 ? 1 : 0))),
      );
      expect(Object.keys(rejected.metrics)).toContain('rollout_rs_masked_fraction');
      const drift = (await runVerlCase(engine, {
        function: `${HELPER}.compute_offpolicy_metrics`,
        kwargs: {},
        inputs: { old_log_prob: LOG_PROB, rollout_log_prob: OLD, response_mask: MASK },
      })) as { metrics: Record<string, number> };
      expect(drift.metrics.kl).toBeCloseTo(
        MASK.reduce((a, row, b) => a + row.reduce((s, m, t) => s + m * (OLD[b][t] - LOG_PROB[b][t]), 0), 0) / tokens,
        5,
      );
      const trainingOnly = (await runVerlCase(engine, {
        function: `${HELPER}.compute_offpolicy_metrics`,
        kwargs: {},
        inputs: { old_log_prob: LOG_PROB, rollout_log_prob: null, response_mask: MASK },
      })) as { metrics: Record<string, number> };
      expect(Object.keys(trainingOnly.metrics)).toEqual(['training_ppl', 'training_log_ppl']);
      expect(trainingOnly.metrics.training_ppl).toBeCloseTo(drift.metrics.training_ppl, 10);
    },
  );

  it(
    `${HELPER}.compute_rollout_correction_and_rejection_mask: weights, the rejected mask and rollout_corr/* ` +
      `metrics`,
    async () => {
      const got = (await runVerlCase(await gpuEngine(), {
        function: `${HELPER}.compute_rollout_correction_and_rejection_mask`,
        kwargs: {
          rollout_is: 'sequence',
          rollout_is_threshold: 2.0,
          rollout_rs: 'seq_max_k2',
          rollout_rs_threshold: 0.01,
        },
        inputs: { old_log_prob: LOG_PROB, rollout_log_prob: OLD, response_mask: MASK },
      })) as { rollout_is_weights: number[][]; modified_response_mask: number[][]; metrics: Record<string, number> };
      MASK.forEach((row, b) => {
        const product = Math.min(Math.exp(row.reduce((a, m, t) => a + m * logRatio[b][t], 0)), 2);
        row.forEach((m, t) => expect(got.rollout_is_weights[b][t], `weight ${b},${t}`).toBeCloseTo(m * product, 5));
        // seq_max_k2: the whole sequence goes when any token's lr²/2 exceeds the bound.
        const keep = row.every((m, t) => m === 0 || 0.5 * logRatio[b][t] ** 2 <= 0.01);
        expect(got.modified_response_mask[b]).toEqual(row.map((m) => (keep ? m : 0)));
      });
      expect(got.modified_response_mask.flat().some((m, i) => m === 0 && flatMask[i] === 1)).toBe(true);
      for (const key of [
        'rollout_is_mean',
        'rollout_rs_seq_max_k2_mean',
        'rollout_rs_masked_fraction',
        'kl',
        'chi2_seq',
      ])
        expect(got.metrics[`rollout_corr/${key}`], key).toBeDefined();
    },
  );

  it("get_policy_loss_fn refuses an unknown name with verl's message", async () => {
    const c: VerlCase = {
      function: `${CORE}.get_policy_loss_fn`,
      kwargs: { name: 'no_such_loss' },
      inputs: { old_log_prob: OLD, log_prob: LOG_PROB, advantages: ADVANTAGES, response_mask: MASK },
    };
    await expect(runVerlCase(await gpuEngine(), c)).rejects.toThrow('Unsupported loss mode: no_such_loss');
  });

  for (const [fn, estimator] of [
    ['grpo_vectorized', 'grpo_vectorized'],
    ['rloo_vectorized', 'rloo_vectorized'],
    ['gpg', 'gpg'],
  ] as const) {
    it(`compute_${fn}_outcome_advantage`, async () => {
      const index = ['a', 'b', 'a', 'c'];
      const rewards = MASK.map((row, b) => row.map((_m, t) => (t === 0 && b !== 1 ? b + 0.5 : 0)));
      const c: VerlCase = {
        function: `${CORE}.compute_${fn}_outcome_advantage`,
        kwargs: { epsilon: 1e-6, norm_adv_by_std_in_grpo: true },
        inputs: { token_level_rewards: rewards, response_mask: MASK, index },
      };
      const got = (await runVerlCase(await gpuEngine(), c)) as { advantages: number[][] };
      const expected = computeOutcomeAdvantageRef(estimator, {
        tokenLevelRewards: rewards.flat(),
        responseMask: MASK.flat(),
        groupOf: groupLayout(index).groupOf,
        epsilon: 1e-6,
        normAdvByStd: true,
        B,
        T,
      });
      expectClose(got.advantages.flat(), expected, 1e-6, 1e-5, estimator);
    });
  }

  it('compute_optimal_token_baseline_advantage', async () => {
    const index = ['a', 'b', 'a', 'a'];
    const rewards = wave(7, 1);
    const sumPiSquared = wave(8, 0.2, 0.5);
    for (const handleZeroTail of [false, true]) {
      const c: VerlCase = {
        function: `${CORE}.compute_optimal_token_baseline_advantage`,
        kwargs: { handle_zero_tail: handleZeroTail, epsilon: 1e-8 },
        inputs: {
          token_level_rewards: rewards,
          response_mask: MASK,
          index,
          old_log_probs: OLD,
          sum_pi_squared: sumPiSquared,
          rollout_is_weights: null,
        },
      };
      const got = (await runVerlCase(await gpuEngine(), c)) as { advantages: number[][]; returns: number[][] };
      const expected = computeOptimalTokenBaselineRef({
        tokenLevelRewards: rewards.flat(),
        responseMask: MASK.flat(),
        groupOf: groupLayout(index).groupOf,
        oldLogProbs: OLD.flat(),
        sumPiSquared: sumPiSquared.flat(),
        handleZeroTail,
        epsilon: 1e-8,
        B,
        T,
      });
      expectClose(got.advantages.flat(), expected.advantages, 1e-5, 1e-4, 'advantages');
      expectClose(got.returns.flat(), expected.returns, 1e-6, 1e-5, 'returns');
    }
  });

  it('compute_multi_turn_optimal_token_baseline_advantage: handle_zero_tail defaults to true', async () => {
    // Tool outputs as interior zeros (rows 0 and 2; row 2 the longer, so it has a zero tail), and an empty row 3
    // in row 1's group.
    const mask = [
      [1, 1, 0, 0, 1],
      [1, 1, 1, 0, 0],
      [1, 0, 1, 1, 1],
      [0, 0, 0, 0, 0],
    ];
    const index = ['a', 'b', 'a', 'b'];
    const rewards = wave(7, 1);
    const sumPiSquared = wave(8, 0.2, 0.5);
    const isWeights = wave(9, 0.3, 1);
    const advantages: number[][] = [];
    for (const [kwargs, handleZeroTail] of [
      [{}, true],
      [{ handle_zero_tail: false }, false],
    ] as const) {
      const c: VerlCase = {
        function: `${CORE}.compute_multi_turn_optimal_token_baseline_advantage`,
        kwargs: { ...kwargs, epsilon: 1e-8 },
        inputs: {
          token_level_rewards: rewards,
          response_mask: mask,
          index,
          old_log_probs: OLD,
          sum_pi_squared: sumPiSquared,
          rollout_is_weights: isWeights,
        },
      };
      const got = (await runVerlCase(await gpuEngine(), c)) as { advantages: number[][]; returns: number[][] };
      const expected = computeMultiTurnOptimalTokenBaselineRef({
        tokenLevelRewards: rewards.flat(),
        responseMask: mask.flat(),
        groupOf: groupLayout(index).groupOf,
        oldLogProbs: OLD.flat(),
        sumPiSquared: sumPiSquared.flat(),
        rolloutIsWeights: isWeights.flat(),
        handleZeroTail,
        epsilon: 1e-8,
        B,
        T,
      });
      expectClose(got.advantages.flat(), expected.advantages, 1e-5, 1e-4, 'advantages');
      expectClose(got.returns.flat(), expected.returns, 1e-6, 1e-5, 'returns');
      advantages.push(got.advantages.flat());
    }
    expect(advantages[0].some((a, i) => Math.abs(a - advantages[1][i]) > 1e-3)).toBe(true);
  });

  it('compute_score goes to the module the function names', async () => {
    const engine = await gpuEngine();
    const solutions = ['so \\boxed{\\frac{1}{2}}', 'the answer is \\boxed{3}', '#### 72'];
    const truths = ['\\frac12', '4', '72'];
    const mathCase: VerlCase = {
      function: 'verl.utils.reward_score.math_reward.compute_score',
      kwargs: {},
      inputs: { solution_str: solutions, ground_truth: truths },
    };
    expect(await runVerlCase(engine, mathCase)).toEqual({
      score: solutions.map((s, i) => math.computeScore(s, truths[i])),
    });
    expect(((await runVerlCase(engine, mathCase)) as { score: number[] }).score[0]).toBe(1);
    const answers = ['<answer>The Eiffel Tower, Paris</answer>', '<answer>Paris</answer>', 'no tag'];
    const qaTruths = answers.map(() => ({ target: ['Paris'] }));
    for (const name of ['compute_score', 'compute_score_subem']) {
      const c: VerlCase = {
        function: `verl.utils.reward_score.search_r1_like_qa_em.${name}`,
        kwargs: { format_score: 0.1 },
        inputs: { solution_str: answers, ground_truth: qaTruths },
      };
      const scorer = name === 'compute_score' ? qaEm.computeScore : qaEm.computeScoreSubem;
      expect(await runVerlCase(engine, c)).toEqual({ score: answers.map((s, i) => scorer(s, qaTruths[i], 0.1)) });
    }
    // Search-R1's fork (module qa_em) reads the last of at least two answers: a single one is the prompt's example.
    const fork = await runVerlCase(engine, {
      function: 'verl.utils.reward_score.qa_em.compute_score_em',
      kwargs: {},
      inputs: {
        solution_str: ['<answer>Paris</answer>', 'e.g. <answer>x</answer> … <answer>paris</answer>'],
        ground_truth: [{ target: ['Paris'] }, { target: ['Paris'] }],
      },
    });
    expect(fork).toEqual({ score: [0, 1] });
    const subem = await runVerlCase(engine, {
      function: 'verl.utils.reward_score.search_r1_like_qa_em.compute_score_subem',
      kwargs: {},
      inputs: { solution_str: answers, ground_truth: qaTruths },
    });
    expect(subem).toEqual({ score: [1, 1, 0] });
  });

  // Each `recorded` list below was recorded by running verl b178a3cd's reward_score code (the mirror's files, with
  // empty verl/ and verl/utils/ package inits so that no torch is needed) under Python 3.11 on these inputs.
  it("math_dapo.compute_score: score per solution, and verl's dicts as result with their acc and pred", async () => {
    const engine = await gpuEngine();
    type Dict = { score: number; acc: boolean; pred: string | null };
    const outputsOf = (recorded: Dict[]) => ({
      score: recorded.map((r) => r.score),
      result: recorded,
      acc: recorded.map((r) => r.acc),
      pred: recorded.map((r) => r.pred),
    });
    const run = (kwargs: Record<string, unknown>, solution_str: string[], ground_truth: string[]) =>
      runVerlCase(engine, {
        function: 'verl.utils.reward_score.math_dapo.compute_score',
        kwargs,
        inputs: { solution_str, ground_truth },
      });
    const minerva: Dict[] = [
      { score: 1.0, acc: true, pred: '1000' },
      { score: 1.0, acc: true, pred: '\\frac{1}{2}' },
      { score: -1.0, acc: false, pred: '[INVALID]' },
    ];
    expect(await run({}, ['Answer: 1,000', 'answer: \\frac12', 'no answer'], ['1000', '\\frac{1}{2}', '3'])).toEqual(
      outputsOf(minerva),
    );
    const strict: Dict[] = [
      { score: 1.0, acc: true, pred: '12' },
      { score: -1.0, acc: false, pred: ' 12' },
      { score: -1.0, acc: false, pred: null },
    ];
    expect(
      await run(
        { strict_box_verify: true },
        ['so \\boxed{12}', 'Answer: 12 so \\boxed{ 12}', 'nothing boxed'],
        ['12', '12', '12'],
      ),
    ).toEqual(outputsOf(strict));
    const paused: Dict[] = [{ score: 1.0, acc: true, pred: '12' }];
    expect(
      await run(
        { strict_box_verify: true, pause_tokens_index: [1, 2, 3, 100] },
        [`\\boxed{12}${'z'.repeat(100)}`],
        ['12'],
      ),
    ).toEqual(outputsOf(paused));
  });

  it(
    'reward_score.default_compute_score routes each data_source as training does; a scalar call gives ' + 'scalars',
    async () => {
      const engine = await gpuEngine();
      const recorded = [{ score: 1.0, acc: true, pred: '1000' }, { score: -1.0, acc: false, pred: '5' }, 1.0, 1.0];
      const mixed = await runVerlCase(engine, {
        function: 'verl.utils.reward_score.default_compute_score',
        kwargs: {},
        inputs: {
          data_source: ['math_dapo', 'aime24', 'openai/gsm8k', 'lighteval/MATH'],
          solution_str: ['Answer: 1,000', 'Answer: 5', 'so #### 72', 'so \\boxed{\\frac12}'],
          ground_truth: ['1000', '6', '72', '0.5'],
        },
      });
      expect(mixed).toEqual({
        score: [1, -1, 1, 1],
        result: recorded,
        acc: [true, false, null, null],
        pred: ['1000', '5', null, null],
      });
      const scalarRecorded = { score: 1.0, acc: true, pred: '\\sqrt{2}' };
      const scalar = await runVerlCase(engine, {
        function: 'verl.utils.reward_score.default_compute_score',
        kwargs: {},
        inputs: {
          data_source: 'aime_2025',
          solution_str: 'Answer: \\sqrt2',
          ground_truth: '\\sqrt{2}',
          extra_info: { index: 3 },
        },
      });
      expect(scalar).toEqual({
        score: scalarRecorded.score,
        result: scalarRecorded,
        acc: scalarRecorded.acc,
        pred: scalarRecorded.pred,
      });
      const gsm8kOnly = await runVerlCase(engine, {
        function: 'verl.utils.reward_score.default_compute_score',
        kwargs: {},
        inputs: { data_source: 'openai/gsm8k', solution_str: ['#### 72', '#### 7'], ground_truth: ['72', '72'] },
      });
      expect(gsm8kOnly).toEqual({ score: [1, 0] });
    },
  );

  it("math_reward.compute_score scores as verl main's math_reward.py", async () => {
    const recorded = [1.0, 0.0, 1.0, 1.0];
    const got = await runVerlCase(await gpuEngine(), {
      function: 'verl.utils.reward_score.math_reward.compute_score',
      kwargs: {},
      inputs: {
        solution_str: ['so \\boxed{\\frac{1}{2}}', 'the answer is \\boxed{3}', '\\boxed{50\\\\\\%}', '$\\boxed 7$'],
        ground_truth: ['\\frac12', '4', '50', '7'],
      },
    });
    expect(got).toEqual({ score: recorded });
  });

  it(
    `${CORE}.compute_pf_ppo_reweight_data: verl's weights of each row's summed score; sample_indices only with a ` +
      `seed`,
    async () => {
      const engine = await gpuEngine();
      // Row sums 2, −1, 0, 2, 0.25: ties at the highest score, a zero. Weights worked from verl's compute_weights and
      // its clamp(w + 1e-8, min=1e-8) (core_algos.py:1905-1955).
      const scores = [
        [0, 1.5, 0.5, 0, 0],
        [-1, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],
        [2, 0, 0, 0, 0],
        [0.25, 0, 0, 0, 0],
      ];
      const fn = `${CORE}.compute_pf_ppo_reweight_data`;
      const run = (kwargs: Record<string, unknown>, seed?: number) =>
        runVerlCase(engine, { function: fn, kwargs, inputs: { token_level_scores: scores }, seed }) as Promise<{
          weights: number[];
          sample_indices?: number[];
        }>;
      const defaults = await run({});
      expectClose(
        defaults.weights,
        [4, 1, 0, 4, 0.0625].map((w) => w + 1e-8),
        0,
        1e-12,
        "pow, weight_pow 2 (verl's defaults)",
      );
      expect(defaults.sample_indices).toBeUndefined();
      expectClose(
        (await run({ reweight_method: 'pow', weight_pow: 0.5 })).weights,
        [Math.SQRT2, 1, 0, Math.SQRT2, 0.5].map((w) => w + 1e-8),
        0,
        1e-12,
        'pow 0.5',
      );
      expect((await run({ reweight_method: 'max_min' })).weights).toEqual([1 + 1e-8, 1 + 1e-8, 1e-8, 1 + 1e-8, 1e-8]);
      expect((await run({ reweight_method: 'max_random' })).weights).toEqual([
        0.4 + 1e-8,
        0.1 + 1e-8,
        0.1 + 1e-8,
        0.4 + 1e-8,
        0.1 + 1e-8,
      ]);
      // Our generator's draws, repeatable for a seed (torch.multinomial's cannot be reproduced): max_min keeps the
      // extremes.
      const seeded = await run({ reweight_method: 'max_min' }, 5);
      expect(seeded.sample_indices).toHaveLength(5);
      expect((await run({ reweight_method: 'max_min' }, 5)).sample_indices).toEqual(seeded.sample_indices);
      for (const i of seeded.sample_indices!) expect([0, 1, 3]).toContain(i);
      await expect(run({ reweight_method: 'softmax' })).rejects.toThrow('Unsupported reweight_method: softmax');
    },
  );

  it('clip_by_value and compute_rewards', async () => {
    const engine = await gpuEngine();
    const x = wave(3, 2);
    const lo = wave(4, 0.5, -0.5);
    const hi = wave(5, 0.5, 0.5);
    const clipped = (await runVerlCase(engine, {
      function: 'verl.utils.torch_functional.clip_by_value',
      kwargs: {},
      inputs: { x, tensor_min: lo, tensor_max: hi },
    })) as { clipped: number[][] };
    expect(clipped.clipped).toEqual(x.map((row, b) => row.map((v, t) => Math.max(Math.min(v, hi[b][t]), lo[b][t]))));
    const scores = wave(6, 1);
    const rewards = (await runVerlCase(engine, {
      function: `${CORE}.compute_rewards`,
      kwargs: { kl_ratio: 0.3 },
      inputs: { token_level_scores: scores, old_log_prob: LOG_PROB, ref_log_prob: OLD },
    })) as { rewards: number[][] };
    expectClose(
      rewards.rewards.flat(),
      scores.flat().map((s, i) => s - (LOG_PROB.flat()[i] - OLD.flat()[i]) * 0.3),
      1e-6,
      1e-5,
      'compute_rewards',
    );
  });
});

// Each verl version's signature, against values from numpy ports of verl's own functions
// (test/support/verl-case-goldens.ts says which).
describe('verl-case follows the signature of verl main, v0.2 and Search-R1', () => {
  type Golden = number | readonly unknown[] | { readonly [key: string]: unknown };
  const expectGolden = (got: unknown, golden: Golden, path: string): void => {
    if (typeof golden === 'number') {
      expect(typeof got, `${path} is a number`).toBe('number');
      expectClose([got as number], [golden], 2e-6, 1e-4, path);
    } else if (Array.isArray(golden)) {
      expect((got as unknown[]).length, `${path} length`).toBe(golden.length);
      golden.forEach((g, i) => expectGolden((got as unknown[])[i], g as Golden, `${path}[${i}]`));
    } else {
      for (const [key, g] of Object.entries(golden))
        expectGolden((got as Record<string, unknown>)[key], g as Golden, `${path}.${key}`);
    }
  };
  const run = async (c: VerlCase) => runVerlCase(await gpuEngine(), c) as Promise<Record<string, unknown>>;
  const HOLES = [
    [1, 1, 0, 1, 1],
    [1, 1, 0, 0, 0],
    [1, 0, 1, 1, 0],
    [1, 1, 1, 1, 1],
  ];
  const VALUES = wave(8, 0.5);
  const withPrompt = (mask: number[][]) => mask.map((row) => [1, 1, ...row]);

  // One clipped token (A < 0, ratio 0.76) weighted 0: verl's metrics come from the unweighted ratios.
  const WEIGHTS = wave(3, 0.4, 1).map((row, b) => row.map((w, t) => (b === 0 && t === 1 ? 0 : w)));
  const WEIGHTED_CONFIGS: Record<keyof typeof GOLDENS.weighted, Record<string, unknown>> = {
    vanilla: {},
    gspo: {},
    gpg: {},
    sapo: { 'config.tau_pos': 1, 'config.tau_neg': 1.5 },
    cispo: { 'config.clip_ratio_low': 0.1, 'config.clip_ratio_high': 0.15 },
    clip_cov: {
      'config.policy_loss.clip_cov_ratio': 1,
      'config.policy_loss.clip_cov_lb': 0,
      'config.policy_loss.clip_cov_ub': 5,
    },
    kl_cov: { 'config.policy_loss.kl_cov_ratio': 0.2, 'config.policy_loss.ppo_kl_coef': 0.5 },
    geo_mean: { 'config.clip_ratio': 0.1 },
    dppo_tv: { 'config.clip_ratio': 0.05, 'config.clip_ratio_c': 1.1 },
    dppo_kl: { 'config.clip_ratio': 0.01, 'config.clip_ratio_c': 1.1 },
    dro: { 'config.policy_loss.dro_beta': 0.7 },
  };
  for (const [mode, kwargs] of Object.entries(WEIGHTED_CONFIGS)) {
    it(`compute_policy_loss_${mode} multiplies the token losses by rollout_is_weights`, async () => {
      const got = await run({
        function: `${CORE}.compute_policy_loss_${mode}`,
        kwargs: { 'config.clip_ratio': 0.2, ...kwargs },
        inputs: {
          old_log_prob: OLD,
          log_prob: LOG_PROB,
          advantages: ADVANTAGES,
          response_mask: MASK,
          rollout_is_weights: WEIGHTS,
        },
      });
      const golden = GOLDENS.weighted[mode as keyof typeof GOLDENS.weighted];
      expectGolden(got, golden, mode);
      expect(Object.keys(got.metrics as object)).toEqual(Object.keys(golden.metrics));
    });
  }

  const WIDE = wave(4, 1.5, -1);
  it(
    "compute_policy_loss: v0.2 (eos_mask, cliprange; no dual clip; 3 outputs) and main's deprecated form (4 " +
      'outputs)',
    async () => {
      const inputs = { old_log_prob: OLD, log_prob: WIDE, advantages: ADVANTAGES };
      expectGolden(
        await run({
          profile: 'legacy_v020',
          function: `${CORE}.compute_policy_loss`,
          kwargs: { cliprange: 0.2 },
          inputs: { ...inputs, eos_mask: MASK },
        }),
        GOLDENS.v02_policy,
        'v0.2',
      );
      const head = await run({
        function: `${CORE}.compute_policy_loss`,
        kwargs: { cliprange: 0.2 },
        inputs: { ...inputs, response_mask: MASK },
      });
      expectGolden(head, GOLDENS.head_deprecated_policy, 'main');
      await expect(
        run({ function: `${CORE}.compute_policy_loss`, kwargs: {}, inputs: { ...inputs, response_mask: MASK } }),
      ).rejects.toThrow('NoneType');
    },
  );

  it('compute_gae_advantage_return: v0.2 carries GAE across masked positions, main skips them', async () => {
    const rewards = wave(7, 1).map((row, b) => row.map((r, t) => r * HOLES[b][t]));
    const c = { function: `${CORE}.compute_gae_advantage_return`, kwargs: { gamma: 0.9, lam: 0.8 } };
    expectGolden(
      await run({
        ...c,
        profile: 'legacy_v020',
        inputs: { token_level_rewards: rewards, values: VALUES, eos_mask: HOLES },
      }),
      GOLDENS.gae_v02,
      'v0.2',
    );
    expectGolden(
      await run({ ...c, inputs: { token_level_rewards: rewards, values: VALUES, response_mask: HOLES } }),
      GOLDENS.gae_head,
      'main',
    );
  });

  const SCORES = MASK.map((row, b) =>
    row.map(
      (_, t) =>
        [
          [0, 4, 1],
          [1, 1, 0.5],
          [2, 2, -1],
          [3, 0, 0.25],
        ].find(([rb, rt]) => rb === b && rt === t)?.[2] ?? 0,
    ),
  );
  const REF = wave(5, 0.3, -1);
  const klCtrl = { type: 'adaptive', kl_coef: 0.05, target_kl: 0.1, horizon: 100 };
  it(
    'ray_trainer.apply_kl_penalty: v0.2 slices attention_mask and reports critic/kl; Search-R1 reads info_mask; no ' +
      'ref_log_prob: β = 0',
    async () => {
      const c = {
        function: 'verl.trainer.ppo.ray_trainer.apply_kl_penalty',
        kwargs: { kl_penalty: 'kl', kl_ctrl: klCtrl },
      };
      const inputs = { token_level_scores: SCORES, old_log_probs: OLD, attention_mask: withPrompt(MASK) };
      expectGolden(
        await run({ ...c, profile: 'legacy_v020', inputs: { ...inputs, ref_log_prob: REF } }),
        GOLDENS.apply_kl_v02,
        'v0.2',
      );
      expectGolden(
        await run({
          ...c,
          profile: 'search_r1',
          inputs: { ...inputs, ref_log_prob: REF, info_mask: withPrompt(HOLES) },
        }),
        GOLDENS.apply_kl_search_r1,
        'Search-R1',
      );
      expectGolden(
        await run({ ...c, profile: 'legacy_v020', inputs }),
        GOLDENS.apply_kl_v02_no_ref,
        'v0.2 without ref',
      );
    },
  );

  const RW = wave(7, 1).map((row, b) => row.map((r, t) => r * MASK[b][t]));
  it(
    'compute_reinforce_plus_plus_outcome_advantage: main reads config.gamma (its gamma kwarg lands in **kwargs), ' +
      'v0.2 gamma',
    async () => {
      const fn = `${CORE}.compute_reinforce_plus_plus_outcome_advantage`;
      expectGolden(
        await run({
          function: fn,
          kwargs: { 'config.gamma': 0.9, gamma: 0.5 },
          inputs: { token_level_rewards: RW, response_mask: MASK },
        }),
        GOLDENS.rfpp_gamma09,
        'main',
      );
      expectGolden(
        await run({
          profile: 'legacy_v020',
          function: fn,
          kwargs: { gamma: 0.9 },
          inputs: { token_level_rewards: RW, eos_mask: MASK },
        }),
        GOLDENS.rfpp_gamma09,
        'v0.2',
      );
      await expect(
        run({ function: fn, kwargs: { gamma: 0.9 }, inputs: { token_level_rewards: RW, response_mask: MASK } }),
      ).rejects.toThrow('config is not None');
      await expect(
        run({
          profile: 'search_r1',
          function: fn,
          kwargs: { gamma: 0.9 },
          inputs: { token_level_rewards: RW, eos_mask: MASK },
        }),
      ).rejects.toThrow('has no attribute');
    },
  );

  const OUTCOME = MASK.map((row, b) =>
    row.map(
      (_, t) =>
        [
          [0, 4, 1],
          [1, 1, 0.2],
          [2, 2, 0.7],
          [3, 0, 0.4],
        ].find(([rb, rt]) => rb === b && rt === t)?.[2] ?? 0,
    ),
  );
  it(
    'compute_grpo_passk_outcome_advantage takes norm_adv_by_std_in_grpo from config, not its own ' + 'argument',
    async () => {
      const got = await run({
        function: `${CORE}.compute_grpo_passk_outcome_advantage`,
        kwargs: { norm_adv_by_std_in_grpo: true, 'config.norm_adv_by_std_in_grpo': false },
        inputs: { token_level_rewards: OUTCOME, response_mask: MASK, index: ['a', 'a', 'b', 'b'] },
      });
      expectGolden(got, GOLDENS.passk_norm_false, 'passk');
    },
  );

  it("agg_loss at 1dda039b: token-sum, the per-sequence norm mode, the trainer's global normalisers", async () => {
    const info = { dp_size: 2, batch_num_tokens: 30, global_batch_size: 6, loss_scale_factor: 7 };
    for (const [scope, kwargs] of [
      ['local', {}],
      ['global', info],
    ] as const) {
      for (const [mode, loss] of Object.entries(GOLDENS.agg_1dda039b[scope])) {
        expectGolden(
          await run({
            function: `${CORE}.agg_loss`,
            kwargs: { loss_agg_mode: mode, ...kwargs },
            inputs: { loss_mat: wave(6, 1), loss_mask: HOLES },
          }),
          { loss },
          `${scope} ${mode}`,
        );
      }
    }
  });

  it('agg_loss with dp_size 2 and no global counts: b178a3cd divides by the local ones, 1dda039b raises', async () => {
    for (const [mode, loss] of Object.entries(GOLDENS.agg_dp2)) {
      expectGolden(
        await run({
          profile: 'head',
          function: `${CORE}.agg_loss`,
          kwargs: { loss_agg_mode: mode, dp_size: 2 },
          inputs: { loss_mat: wave(6, 1), loss_mask: MASK },
        }),
        { loss },
        mode,
      );
      await expect(
        run({
          function: `${CORE}.agg_loss`,
          kwargs: { loss_agg_mode: mode, dp_size: 2 },
          inputs: { loss_mat: wave(6, 1), loss_mask: MASK },
        }),
      ).rejects.toThrow('is required when dp_size > 1');
    }
  });

  it(
    "kl_penalty: b178a3cd raises for a '+' name (kl_penalty_forward gets it unstripped), 1dda039b strips it, v0.2 " +
      'raises for k1/k2/k3; kl_penalty_forward',
    async () => {
      const inputs = { logprob: LOG_PROB, ref_logprob: REF };
      await expect(
        run({ profile: 'head', function: `${CORE}.kl_penalty`, kwargs: { kl_penalty: 'k3+' }, inputs }),
      ).rejects.toThrow('NotImplementedError');
      // The k3 value with the straight-through gradient logprob − ref (k2's).
      const plus = (await run({ function: `${CORE}.kl_penalty`, kwargs: { kl_penalty: 'k3+' }, inputs })) as {
        kl: number[][];
        grad_logprob_of_sum: number[][];
      };
      expectClose(plus.kl.flat(), klPenaltyRef(LOG_PROB.flat(), REF.flat(), 'k3').kl, 1e-6, 1e-5, 'k3+ kl');
      expectClose(
        plus.grad_logprob_of_sum.flat(),
        klPenaltyRef(LOG_PROB.flat(), REF.flat(), 'k2').grad,
        1e-6,
        1e-5,
        'k3+ grad',
      );
      await expect(
        run({ profile: 'legacy_v020', function: `${CORE}.kl_penalty`, kwargs: { kl_penalty: 'k3' }, inputs }),
      ).rejects.toThrow('NotImplementedError');
      const got = (await run({ function: `${CORE}.kl_penalty_forward`, kwargs: { kl_penalty: 'k3' }, inputs })) as {
        kl: number[][];
        grad_logprob_of_sum: number[][];
      };
      const expected = klPenaltyRef(LOG_PROB.flat(), REF.flat(), 'low_var_kl');
      expectClose(got.kl.flat(), expected.kl, 1e-6, 1e-5, 'kl');
      expectClose(got.grad_logprob_of_sum.flat(), expected.grad, 1e-6, 1e-5, 'grad');
    },
  );

  it('get_kl_controller: main reads kl_ctrl, v0.2 config.critic.kl_ctrl; the horizon assertion', async () => {
    const steps = { current_kl_seq: [0.2, 0.05, 0.1], n_steps_seq: [6, 6, 3] };
    expectGolden(
      await run({ function: `${CORE}.get_kl_controller`, kwargs: { kl_ctrl: klCtrl }, inputs: steps }),
      GOLDENS.adaptive_controller,
      'main',
    );
    expect(
      await run({
        profile: 'legacy_v020',
        function: `${CORE}.get_kl_controller`,
        kwargs: { 'config.critic.kl_ctrl': { type: 'fixed', kl_coef: 0.02 } },
        inputs: {},
      }),
    ).toEqual({ value: 0.02 });
    await expect(
      run({ function: `${CORE}.get_kl_controller`, kwargs: { kl_ctrl: { ...klCtrl, horizon: 0 } }, inputs: {} }),
    ).rejects.toThrow('horizon must be larger than 0. Got 0');
  });

  it('ray_trainer.compute_advantage calls each estimator as the trainer does', async () => {
    const fn = 'verl.trainer.ppo.ray_trainer.compute_advantage';
    const inputs = { token_level_rewards: RW, values: VALUES };
    expectGolden(
      await run({
        function: fn,
        kwargs: { adv_estimator: 'gae', gamma: 0.9, lam: 0.8 },
        inputs: { ...inputs, response_mask: MASK },
      }),
      GOLDENS.compute_advantage_gae,
      'gae',
    );
    expectGolden(
      await run({
        profile: 'legacy_v020',
        function: fn,
        kwargs: { adv_estimator: 'gae', gamma: 0.9, lam: 0.8 },
        inputs: { ...inputs, attention_mask: withPrompt(MASK) },
      }),
      GOLDENS.compute_advantage_gae_v02,
      'v0.2 gae',
    );
    expectGolden(
      await run({
        function: fn,
        kwargs: { adv_estimator: 'reinforce_plus_plus', gamma: 0.5, 'config.gamma': 0.9 },
        inputs: { ...inputs, response_mask: MASK },
      }),
      GOLDENS.rfpp_gamma09,
      'reinforce++',
    );
    await expect(
      run({
        function: fn,
        kwargs: { adv_estimator: 'grpo_passk' },
        inputs: { ...inputs, response_mask: MASK, uid: ['a', 'a', 'b', 'b'] },
      }),
    ).rejects.toThrow('config is not None');
  });

  it(
    'refusals: bypass_mode without rollout_correction or with an unknown loss_type, rollout_is levels, v0.2 ' +
      "signatures, verl's assertion words",
    async () => {
      const losses = { old_log_prob: OLD, log_prob: LOG_PROB, advantages: ADVANTAGES, response_mask: MASK };
      await expect(
        run({
          function: `${CORE}.compute_policy_loss_bypass_mode`,
          kwargs: { 'config.clip_ratio': 0.2 },
          inputs: losses,
        }),
      ).rejects.toThrow('rollout_correction config not found');
      await expect(
        run({
          function: `${CORE}.compute_policy_loss_bypass_mode`,
          kwargs: { 'config.policy_loss.rollout_correction.loss_type': 'ppo' },
          inputs: losses,
        }),
      ).rejects.toThrow('Invalid loss_type: ppo');
      await expect(
        run({ function: `${CORE}.compute_policy_loss_vanilla`, kwargs: { 'config.clip_ratio_c': 1 }, inputs: losses }),
      ).rejects.toThrow('The lower bound of the clip_ratio_c');
      await expect(
        run({
          function: `${CORE}.compute_policy_loss_vanilla`,
          kwargs: { loss_agg_mode: 'mean', 'config.clip_ratio': 0.2 },
          inputs: losses,
        }),
      ).rejects.toThrow('Invalid loss_agg_mode: mean');
      // gspo never reads its loss_agg_mode: verl answers, with seq-mean-token-mean.
      const gspo = await run({
        function: `${CORE}.compute_policy_loss_gspo`,
        kwargs: { loss_agg_mode: 'mean', 'config.clip_ratio': 0.2 },
        inputs: losses,
      });
      expect(gspo.pg_loss).toBeCloseTo(
        (
          await run({
            function: `${CORE}.compute_policy_loss_gspo`,
            kwargs: { 'config.clip_ratio': 0.2 },
            inputs: losses,
          })
        ).pg_loss as number,
        6,
      );
      await expect(
        run({
          function: 'verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_weights',
          kwargs: { rollout_is: 'geometric' },
          inputs: { log_ratio: OLD, response_mask: MASK },
        }),
      ).rejects.toThrow('Invalid rollout_is: geometric');
      const v02 = { profile: 'legacy_v020', kwargs: {} };
      await expect(
        run({
          ...v02,
          function: `${CORE}.compute_grpo_outcome_advantage`,
          kwargs: { norm_adv_by_std_in_grpo: false },
          inputs: { token_level_rewards: OUTCOME, eos_mask: MASK, index: [0, 0, 1, 1] },
        }),
      ).rejects.toThrow("unexpected keyword argument 'norm_adv_by_std_in_grpo'");
      await expect(
        run({
          ...v02,
          function: `${CORE}.compute_value_loss`,
          kwargs: { cliprange_value: 0.5, loss_agg_mode: 'token-mean' },
          inputs: { vpreds: OLD, returns: LOG_PROB, values: REF, eos_mask: MASK },
        }),
      ).rejects.toThrow("unexpected keyword argument 'loss_agg_mode'");
      await expect(
        run({
          ...v02,
          function: `${CORE}.agg_loss`,
          kwargs: { loss_agg_mode: 'token-mean' },
          inputs: { loss_mat: OLD, loss_mask: MASK },
        }),
      ).rejects.toThrow("has no attribute 'agg_loss'");
      const oneToken = MASK.map((row, b) => row.map((_, t) => (b === 0 && t === 0 ? 1 : 0)));
      await expect(
        run({
          function: 'verl.utils.torch_functional.masked_sum|masked_mean|masked_var|masked_whiten',
          kwargs: {},
          inputs: { values: OLD, mask: oneToken },
        }),
      ).rejects.toThrow('The sum of the mask is one');
    },
  );

  it(
    'rollout_corr_helper.compute_rollout_corr_metrics_from_logprobs: the prefixed off-policy metrics of the current ' +
      'policy',
    async () => {
      const got = await run({
        function: 'verl.trainer.ppo.rollout_corr_helper.compute_rollout_corr_metrics_from_logprobs',
        kwargs: {},
        inputs: { log_prob: LOG_PROB, rollout_log_prob: OLD, response_mask: MASK },
      });
      expectGolden(got.metrics, GOLDENS.corr_metrics_from_logprobs, 'metrics');
      expect(Object.keys(got.metrics as object).sort()).toEqual(Object.keys(GOLDENS.corr_metrics_from_logprobs).sort());
    },
  );

  it(
    'logprobs_of_labels_v2 (v0.2) asserts float32 logits: the float64 recordings raise, a float32 case ' + 'computes',
    async () => {
      const logits = MASK.map((row, b) =>
        row.map((_, t) => [0, 1, 2].map((v) => 1.5 * Math.sin(1.7 * b + 2.3 * t + 0.9 * v))),
      );
      const labels = MASK.map((row, b) => row.map((_, t) => (b + 2 * t) % 3));
      const c = {
        profile: 'legacy_v020',
        function: 'verl.utils.torch_functional.logprobs_of_labels_v2',
        kwargs: {},
        inputs: { logits, labels },
      };
      await expect(run(c)).rejects.toThrow('Using bf16 logits with logprobs_of_labels_v2');
      const got = (await run({ ...c, dtype: 'float32' })) as { logprobs: number[][] };
      expectClose(
        got.logprobs.flat(),
        logprobEntropyRef(logits.flat(2), labels.flat(), B * T, 3).logProb,
        1e-6,
        1e-5,
        'logprobs',
      );
    },
  );

  it('entropy_from_logits_with_chunking takes (N, V) rows', async () => {
    const rows = [0, 1, 2, 3, 4, 5, 6].map((n) => [0, 1, 2, 3].map((v) => 2 * Math.sin(1.3 * n + 0.7 * v)));
    const got = (await run({
      function: 'verl.utils.torch_functional.entropy_from_logits_with_chunking',
      kwargs: { chunk_size: 3 },
      inputs: { logits: rows },
    })) as { entropy: number[]; grad_logits_of_sum_entropy: number[][] };
    const flat = rows.flat();
    const zeros = rows.map(() => 0);
    expectClose(got.entropy, logprobEntropyRef(flat, zeros, rows.length, 4).entropy, 1e-6, 1e-5, 'entropy');
    expectClose(
      got.grad_logits_of_sum_entropy.flat(),
      logprobEntropyBackwardRef(
        flat,
        zeros,
        zeros,
        rows.map(() => 1),
        rows.length,
        4,
      ),
      1e-6,
      1e-4,
      'grad',
    );
  });

  it('Search-R1 PPO step: info_mask state masking, v0.2 GAE and policy loss, critic/kl', async () => {
    const wave3 = (phase: number, scale: number) =>
      MASK.map((row, b) =>
        row.map((_, t) => [0, 1, 2].map((v) => scale * Math.sin(1.7 * b + 2.3 * t + 0.9 * v + phase))),
      );
    const labels = MASK.map((row, b) => row.map((_, t) => (b + 2 * t) % 3));
    const gather = (logits: number[][][]) => {
      const { logProb } = logprobEntropyRef(logits.flat(2), labels.flat(), B * T, 3);
      return MASK.map((row, b) => row.map((_, t) => logProb[b * T + t]));
    };
    const state = MASK.map((row, b) => row.map((m, t) => m * HOLES[b][t]));
    const got = await run({
      profile: 'search_r1',
      function:
        'ray_trainer.apply_kl_penalty -> compute_advantage(GAE) -> core_algos.compute_policy_loss + entropy + kl ' +
        'loss (state masking) ; compute_value_loss',
      kwargs: {
        gamma: 0.9,
        lam: 0.8,
        kl_coef: 0.05,
        kl_penalty: 'kl',
        clip_ratio: 0.2,
        entropy_coeff: 0.01,
        kl_loss_coef: 0.001,
        kl_loss_type: 'low_var_kl',
        cliprange_value: 0.5,
        kl_ctrl_type: 'fixed',
      },
      inputs: {
        logits: wave3(0, 1.5),
        responses: labels,
        old_log_probs: gather(wave3(0.6, 1.5)),
        ref_log_prob: gather(wave3(1.1, 1.2)),
        token_level_scores: SCORES,
        attention_mask: withPrompt(MASK),
        info_mask: withPrompt(state),
        values: VALUES,
        vpreds: wave(9, 0.7),
      },
    });
    expectGolden(got, GOLDENS.search_r1_pipeline, 'step');
    expect(Object.keys(got.kl_metrics as object)).toEqual(['critic/kl', 'critic/kl_coeff']);
  });
});
