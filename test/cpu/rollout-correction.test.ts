// Rollout correction's drift metrics against verl's rollout_corr_helper.compute_offpolicy_metrics, worked by hand
// on two sequences whose log-probs are logs of powers of two (masked slots hold values that must not count).
import { describe, it, expect } from 'vitest';
import {
  rolloutMismatchMetrics,
  rolloutIsWeights,
  rolloutRejectionMask,
} from '../../ppo/algorithm/rollout-correction.ts';
import { parseRolloutRs } from '../../ppo/config/rollout-rs-spec.ts';
import { loadConfig } from '../../ppo/config.ts';
import { planStep } from '../../ppo/step-plan.ts';
import { computeActorLossRef } from '../../kernels/ppo/policy-loss.ref.ts';
import { localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import { resolvePolicyLossConfig } from '../../ppo/algorithm/policy-loss-config.ts';
import { bypassCorrection, BYPASS_LOSS_MODES } from '../../ppo/algorithm/bypass-correction.ts';
import { numericGradient } from '../support/numeric-gradient.ts';
import { POLICY_LOSS_MODES } from '../../kernels/ppo/ppo-vocabulary.ts';
import { expectClose } from '../support/arrays.ts';

const ln2 = Math.log(2);

describe('rollout_corr/* mismatch metrics (verl compute_offpolicy_metrics)', () => {
  // Row 0: training p = (1/2, 1/4), rollout p = (1/4, 1/4), third slot masked. Row 1: one token, both p = 1/2.
  const old = Float32Array.from([-ln2, -2 * ln2, 100, -ln2, 7, -7]);
  const rollout = Float32Array.from([-2 * ln2, -2 * ln2, -100, -ln2, 3, 9]);
  const mask = Float32Array.from([1, 1, 0, 1, 0, 0]);
  const m = rolloutMismatchMetrics(old, rollout, mask, 2, 3);
  // Token log-ratios (old − rollout) over the 3 tokens: ln2, 0, 0; sequence sums: ln2, 0.
  // Per-sequence mean log-probs: training −1.5·ln2, −ln2; rollout −2·ln2, −ln2.
  const expected: Record<string, number> = {
    'rollout_corr/kl': -ln2 / 3,
    'rollout_corr/k3_kl': (2 - ln2 - 1) / 3,
    'rollout_corr/training_ppl': (2 ** 1.5 + 2) / 2,
    'rollout_corr/training_log_ppl': (1.5 * ln2 + ln2) / 2,
    'rollout_corr/rollout_ppl': (4 + 2) / 2,
    'rollout_corr/rollout_log_ppl': (2 * ln2 + ln2) / 2,
    'rollout_corr/log_ppl_diff': (-0.5 * ln2 + 0) / 2,
    'rollout_corr/log_ppl_abs_diff': 0.25 * ln2,
    'rollout_corr/log_ppl_diff_max': 0,
    'rollout_corr/log_ppl_diff_min': -0.5 * ln2,
    'rollout_corr/ppl_ratio': (2 ** -0.5 + 1) / 2,
    'rollout_corr/chi2_token': (4 + 1 + 1) / 3 - 1,
    'rollout_corr/chi2_seq': (4 + 1) / 2 - 1,
  };

  it("gives verl's names and values", () => {
    expect(Object.keys(m).sort()).toEqual(Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) expect(m[key], key).toBeCloseTo(value, 5);
  });

  it('is zero drift when the rollout and the training forward agree', () => {
    const same = rolloutMismatchMetrics(old, old, mask, 2, 3);
    for (const key of ['kl', 'k3_kl', 'log_ppl_diff', 'log_ppl_abs_diff', 'chi2_token', 'chi2_seq'])
      expect(same[`rollout_corr/${key}`], key).toBeCloseTo(0, 6);
    expect(same['rollout_corr/ppl_ratio']).toBeCloseTo(1, 6);
  });

  it('clamps log-ratios at ±20 (verl SAFETY_BOUND) in the χ² terms', () => {
    const c = rolloutMismatchMetrics(Float32Array.from([0]), Float32Array.from([-30]), Float32Array.from([1]), 1, 1);
    expect(c['rollout_corr/chi2_token']).toBeCloseTo(Math.exp(40) - 1, -10);
    expect(c['rollout_corr/chi2_seq']).toBeCloseTo(Math.exp(40) - 1, -10);
    expect(c['rollout_corr/kl']).toBeCloseTo(-30, 4);
  });

  it('refuses an empty response mask and mismatched shapes, as verl does', () => {
    expect(() => rolloutMismatchMetrics(old, rollout, new Float32Array(6), 2, 3)).toThrow(/at least one valid token/);
    expect(() => rolloutMismatchMetrics(old, rollout.subarray(0, 3), mask, 2, 3)).toThrow(/N·R/);
  });
});

describe('rollout_is weights (verl compute_rollout_correction_weights)', () => {
  // The same two sequences: token log-ratios ln2, 0 | 0, so pre-truncation weights 2, 1 | 1; threshold 1.5.
  const old = Float32Array.from([-ln2, -2 * ln2, 100, -ln2, 7, -7]);
  const rollout = Float32Array.from([-2 * ln2, -2 * ln2, -100, -ln2, 3, 9]);
  const mask = Float32Array.from([1, 1, 0, 1, 0, 0]);

  const expectMetrics = (metrics: Record<string, number>, expected: Record<string, number>) => {
    expect(Object.keys(metrics).sort()).toEqual(
      Object.keys(expected)
        .map((k) => `rollout_corr/${k}`)
        .sort(),
    );
    for (const [key, value] of Object.entries(expected))
      expect(metrics[`rollout_corr/${key}`], key).toBeCloseTo(value, 5);
  };

  it("token: truncated per-token weights and verl 1dda039b's rollout_is_* metrics of them", () => {
    const { weights, metrics } = rolloutIsWeights(old, rollout, mask, 2, 3, 'token', 1.5, false);
    expect(Array.from(weights)).toEqual([1.5, 1, 0, 1, 0, 0]);
    // Mean, max, min, std, ESS and the sequence means of the applied weights 1.5, 1 | 1; the high/low fractions
    // (token and sequence) of the raw ratios 2, 1 | 1.
    expectMetrics(metrics, {
      rollout_is_mean: 3.5 / 3,
      rollout_is_ratio_fraction_high: 1 / 3,
      rollout_is_ratio_fraction_low: 0,
      rollout_is_max: 1.5,
      rollout_is_min: 1,
      rollout_is_std: Math.sqrt(4.25 / 3 - (3.5 / 3) ** 2),
      rollout_is_eff_sample_size: (3.5 / 3) ** 2 / (4.25 / 3),
      rollout_is_seq_mean: 1.125,
      rollout_is_seq_std: Math.sqrt(2 * 0.125 ** 2),
      rollout_is_seq_max: 1.25,
      rollout_is_seq_min: 1,
      rollout_is_seq_max_deviation: 0.25,
      rollout_is_seq_fraction_high: 0,
      rollout_is_seq_fraction_low: 0,
    });
  });

  it("token: verl b178a3cd's metrics of the raw ratios (the harness's head profile)", () => {
    const { weights, metrics } = rolloutIsWeights(old, rollout, mask, 2, 3, 'token', 1.5, false, false);
    expect(Array.from(weights)).toEqual([1.5, 1, 0, 1, 0, 0]);
    // std and ESS over the ratios clamped to [1/1.5, 1.5]: 1.5, 1, 1.
    expectMetrics(metrics, {
      rollout_is_mean: 4 / 3,
      rollout_is_ratio_fraction_high: 1 / 3,
      rollout_is_ratio_fraction_low: 0,
      rollout_is_max: 2,
      rollout_is_min: 1,
      rollout_is_std: Math.sqrt(4.25 / 3 - (3.5 / 3) ** 2),
      rollout_is_eff_sample_size: (3.5 / 3) ** 2 / (4.25 / 3),
      rollout_is_seq_mean: 1.25,
      rollout_is_seq_std: Math.sqrt(2 * 0.25 ** 2),
      rollout_is_seq_max: 1.5,
      rollout_is_seq_min: 1,
      rollout_is_seq_max_deviation: 0.5,
      rollout_is_seq_fraction_high: 0,
      rollout_is_seq_fraction_low: 0,
    });
  });

  it('IcePop ("lower_upper"): weights outside the bounds are zeroed, and their share is rollout_is_oob_ratio', () => {
    const { weights, metrics } = rolloutIsWeights(old, rollout, mask, 2, 3, 'token', '0.8_1.5', false);
    expect(Array.from(weights)).toEqual([0, 1, 0, 1, 0, 0]);
    expect(metrics['rollout_corr/rollout_is_oob_ratio']).toBeCloseTo(1 / 3, 6);
    expect(metrics['rollout_corr/rollout_is_mean']).toBeCloseTo(2 / 3, 6);
    expect(metrics['rollout_corr/rollout_is_min']).toBe(0);
    expect(metrics['rollout_corr/rollout_is_ratio_fraction_high']).toBeCloseTo(1 / 3, 6);
    // A float string is TIS, as a number.
    expect(Array.from(rolloutIsWeights(old, rollout, mask, 2, 3, 'token', '1.5', false).weights)).toEqual([
      1.5, 1, 0, 1, 0, 0,
    ]);
    for (const [spec, message] of [
      ['2.0_0.5', /lower bound must be <= upper bound/],
      ['0_2', /lower bound must be positive/],
      ['', /must not be an empty string/],
      ['a_b', /Invalid rollout_is_threshold/],
      [-1, /upper bound must be positive/],
    ] as const)
      expect(() => rolloutIsWeights(old, rollout, mask, 2, 3, 'token', spec, false)).toThrow(message);
  });

  it("sequence: the product of the sequence's ratios on each of its tokens", () => {
    const { weights, metrics } = rolloutIsWeights(old, rollout, mask, 2, 3, 'sequence', 1.5, false);
    expect(Array.from(weights)).toEqual([1.5, 1.5, 0, 1, 0, 0]);
    expect(metrics['rollout_corr/rollout_is_mean']).toBeCloseTo(4 / 3, 5);
    expect(metrics['rollout_corr/rollout_is_max']).toBeCloseTo(2, 5);
    expect(metrics['rollout_corr/rollout_is_min']).toBeCloseTo(1, 5);
    expect(metrics['rollout_corr/rollout_is_ratio_fraction_high']).toBe(0.5);
  });

  it('rollout_is_batch_normalize divides the truncated weights by their mean', () => {
    const { weights, metrics } = rolloutIsWeights(old, rollout, mask, 2, 3, 'token', 1.5, true);
    const mean = 3.5 / 3;
    expect(metrics['rollout_corr/rollout_is_batch_norm_factor']).toBeCloseTo(mean, 5);
    [1.5, 1, 0, 1, 0, 0].forEach((w, i) => expect(weights[i]).toBeCloseTo(w / mean, 5));
  });

  it('a half-precision rollout (rollout.dtype) keeps its own log-probs and recomputes old ones, as servers do', () => {
    const noRecompute = 'actor_rollout_ref.rollout.calculate_log_probs=false';
    for (const dtype of ['bfloat16', 'float16']) {
      const config = loadConfig({ overrides: [noRecompute, `actor_rollout_ref.rollout.dtype=${dtype}`] });
      expect(planStep(config).experience.calculateLogProbs, dtype).toBe(true);
      // …so rollout_is, which compares the two, is taken.
      const is = loadConfig({
        overrides: [
          noRecompute,
          `actor_rollout_ref.rollout.dtype=${dtype}`,
          'algorithm.rollout_correction.rollout_is=token',
        ],
      });
      expect(planStep(is).rolloutIs?.level, dtype).toBe('token');
    }
    expect(
      planStep(loadConfig({ overrides: [noRecompute, 'actor_rollout_ref.rollout.dtype=float32'] })).experience
        .calculateLogProbs,
    ).toBe(false);
    expect(() => loadConfig({ overrides: ['actor_rollout_ref.rollout.dtype=bf16'] })).toThrow(
      /actor_rollout_ref\.rollout\.dtype.*bfloat16/,
    );
  });

  it("the config refuses rollout_is without the rollout's log-probs, and takes it with every policy loss", () => {
    expect(() =>
      planStep(
        loadConfig({
          overrides: [
            'algorithm.rollout_correction.rollout_is=token',
            'actor_rollout_ref.rollout.calculate_log_probs=false',
          ],
        }),
      ),
    ).toThrow(/calculate_log_probs=true/);
    for (const lossMode of POLICY_LOSS_MODES) {
      expect(
        planStep(
          loadConfig({
            overrides: [
              'algorithm.rollout_correction.rollout_is=token',
              'actor_rollout_ref.rollout.calculate_log_probs=true',
              `actor_rollout_ref.actor.policy_loss.loss_mode=${lossMode}`,
              // dro has no default β.
              'actor_rollout_ref.actor.policy_loss.dro_beta=0.1',
            ],
          }),
        ).rolloutIs,
        lossMode,
      ).toEqual({ level: 'token', threshold: 2, batchNormalize: false });
    }
    expect(
      planStep(
        loadConfig({
          overrides: [
            'algorithm.rollout_correction.rollout_is=sequence',
            'actor_rollout_ref.rollout.calculate_log_probs=true',
          ],
        }),
      ).rolloutIs,
    ).toEqual({ level: 'sequence', threshold: 2, batchNormalize: false });
  });
});

describe("rollout_is in the policy loss: the reference's isWeights are verl's pg_losses × rollout_is_weights", () => {
  // verl: agg_loss(pg_losses · w), geo_mean: mean(seq_loss · exp(mean log(w + 1e-10))). Each token's own loss comes
  // from the unweighted reference run on that token alone with the whole batch's token-mean denominator (geo_mean: each
  // row's, on that row alone); Σ w · that is the weighted loss, and its gradient matches central differences. One valid
  // token is weighted 0; clip_cov and kl_cov take a fixed pick. (CISPO's detached ratio has no finite-difference
  // gradient; it is among the losses below.)
  const B = 2,
    T = 3;
  const mask = [1, 1, 1, 1, 1, 0];
  const oldLogProb = [-1, -0.5, -2, -0.1, -1.2, 0];
  const logProb = [-0.6, -0.9, -1.0, -0.1, -2.5, 0];
  const advantages = [1.5, -2, 0.7, -0.4, -3, 0];
  const weights = [2, 0, 1, 1.2, 0.3, 0];
  const aggregation = localAggregation('token-mean', mask, B, T);
  const selected = [0, 1, 1, 0, 1, 0];
  const reference = (lossMode: string, x: ArrayLike<number>, m: number[], isWeights?: number[]) =>
    computeActorLossRef({
      oldLogProb,
      logProb: x,
      advantages,
      responseMask: m,
      B,
      T,
      aggregation,
      selected,
      isWeights,
      config: resolvePolicyLossConfig({ lossMode, clipRatio: 0.2, clipRatioC: 3, ppoKlCoef: 0.5 }),
    });
  const rowWeight = (b: number) =>
    Math.exp(
      [0, 1, 2].reduce((a, t) => a + Math.log(weights[b * T + t] + 1e-10) * mask[b * T + t], 0) /
        (mask.slice(b * T, (b + 1) * T).reduce((a, m) => a + m, 0) + 1e-8),
    );
  for (const lossMode of ['vanilla', 'gpg', 'clip_cov', 'kl_cov', 'geo_mean']) {
    it(`${lossMode}`, () => {
      const weighted = reference(lossMode, logProb, mask, weights);
      const plain = reference(lossMode, logProb, mask);
      let loss = 0;
      const grad = new Float64Array(B * T);
      const parts: [number[], number][] =
        lossMode === 'geo_mean'
          ? [0, 1].map((b) => [mask.map((m, i) => (Math.floor(i / T) === b ? m : 0)), rowWeight(b)])
          : mask.flatMap((m, t) =>
              m === 0 ? [] : [[mask.map((_, i) => Number(i === t)), weights[t]] as [number[], number]],
            );
      for (const [part, w] of parts) {
        const one = reference(lossMode, logProb, part);
        loss += w * one.pgLoss;
        one.gradLogProb.forEach((g, i) => (grad[i] += w * g));
      }
      expect(Math.abs(weighted.pgLoss - plain.pgLoss)).toBeGreaterThan(0.05);
      expect(weighted.pgLoss).toBeCloseTo(loss, 10);
      weighted.gradLogProb.forEach((g, i) => expect(g, `grad[${i}]`).toBeCloseTo(grad[i], 10));
      const x = Float64Array.from(logProb);
      expectClose(
        weighted.gradLogProb,
        numericGradient(x, () => reference(lossMode, x, mask, weights).pgLoss),
        1e-8,
        1e-6,
        'd loss / d log_prob',
      );
      for (const key of ['pgClipfrac', 'ppoKl', 'pgClipfracLower'] as const)
        expect(weighted[key], key).toBe(plain[key]);
    });
  }
  // Vanilla, GSPO, GPG, CISPO and SAPO: sign-preserving in A, so with w > 0 the weighted loss is the loss of A × w.
  for (const lossMode of ['vanilla', 'gspo', 'gpg', 'cispo', 'sapo']) {
    it(`${lossMode}: the loss of advantages × weights`, () => {
      const positive = weights.map((w) => w + 0.1);
      const config = resolvePolicyLossConfig({ lossMode, clipRatio: 0.2, clipRatioC: 3, tauPos: 1, tauNeg: 1.05 });
      const weighted = computeActorLossRef({
        oldLogProb,
        logProb,
        advantages,
        responseMask: mask,
        B,
        T,
        aggregation,
        config,
        isWeights: positive,
      });
      const scaled = computeActorLossRef({
        oldLogProb,
        logProb,
        advantages: advantages.map((a, i) => a * positive[i]),
        responseMask: mask,
        B,
        T,
        aggregation,
        config,
      });
      expect(weighted.pgLoss).toBeCloseTo(scaled.pgLoss, 12);
      weighted.gradLogProb.forEach((g, i) => expect(g, `grad[${i}]`).toBeCloseTo(scaled.gradLogProb[i], 12));
    });
  }
});

describe('rollout_rs options and thresholds (verl _parse_rollout_rs_thresholds, rollout_corr_helper.py:93-153)', () => {
  it("takes one threshold per option, LOWER_UPPER for k1 options, as verl's multi-RS example writes them", () => {
    expect(parseRolloutRs('token_k1,seq_max_k2', '0.6_1.6,2.5')).toEqual([
      { option: 'token_k1', lower: 0.6, upper: 1.6 },
      { option: 'seq_max_k2', lower: null, upper: 2.5 },
    ]);
  });
  it(
    "shares one threshold, a k1 option's lower bound defaulting to 1/upper, and drops repeated options (lines " +
      '115-125, 210-217)',
    () => {
      expect(parseRolloutRs(' token_k1 , seq_sum_k3,token_k1', '2')).toEqual([
        { option: 'token_k1', lower: 0.5, upper: 2 },
        { option: 'seq_sum_k3', lower: null, upper: 2 },
      ]);
    },
  );
  it('refuses bad specifications in one line naming the key', () => {
    const cases: [string, string | null, RegExp][] = [
      ['token', '2', /rollout_rs=token is verl's older spelling; verl main writes token_k1/],
      ['geometric', '2', /writes seq_mean_k1/],
      ['sequence', '2', /writes seq_sum_k1/],
      ['seq_max_k1', '2', /unknown option "seq_max_k1"/],
      [' , ', '2', /at least one option/],
      ['token_k1,token_k2,token_k3', '1,2', /exactly 3/],
      ['token_k2', '0.5_2', /single upper bound/],
      ['token_k3', '-1', /positive number/],
      ['token_k1', '0_2', /positive number/],
      ['seq_sum_k2', 'abc', /positive number/],
      ['token_k1', null, /needs algorithm.rollout_correction.rollout_rs_threshold/],
    ];
    for (const [options, thresholds, message] of cases) {
      expect(() => parseRolloutRs(options, thresholds), `${options} / ${thresholds}`).toThrow(message);
      try {
        parseRolloutRs(options, thresholds);
      } catch (e) {
        expect((e as Error).message).not.toContain('\n');
      }
    }
  });
  it(
    "reads the example's quoted command-line values, and refuses the dropped rollout_rs_threshold_lower with a " +
      'hint',
    () => {
      const plan = planStep(
        loadConfig({
          overrides: [
            'actor_rollout_ref.rollout.calculate_log_probs=True',
            "algorithm.rollout_correction.rollout_rs='token_k1,seq_max_k2'",
            "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6,2.5'",
          ],
        }),
      );
      expect(plan.rolloutRs).toEqual([
        { option: 'token_k1', lower: 0.6, upper: 1.6 },
        { option: 'seq_max_k2', lower: null, upper: 2.5 },
      ]);
      expect(
        planStep(
          loadConfig({
            overrides: [
              'actor_rollout_ref.rollout.calculate_log_probs=true',
              'algorithm.rollout_correction.rollout_rs=seq_mean_k3',
              'algorithm.rollout_correction.rollout_rs_threshold=0.01',
            ],
          }),
        ).rolloutRs,
      ).toEqual([{ option: 'seq_mean_k3', lower: null, upper: 0.01 }]);
      expect(() => loadConfig({ overrides: ['algorithm.rollout_correction.rollout_rs_threshold_lower=0.5'] })).toThrow(
        /LOWER_UPPER/,
      );
    },
  );
});

describe('rollout_rs rejection (verl compute_rollout_rejection_mask, rollout_corr_helper.py:156-372)', () => {
  // Log-ratios lr = old − rollout on the 3 response tokens: ln2, 0 | 0 (the masked slots hold values that would
  // reject). Lines 222-224: k1 = −lr = −ln2, 0 | 0; k2 = lr²/2 = ln2²/2, 0 | 0; k3 = e^lr − 1 − lr = 1 − ln2, 0 | 0.
  const old = Float32Array.from([-ln2, -2 * ln2, 100, -ln2, 7, -7]);
  const rollout = Float32Array.from([-2 * ln2, -2 * ln2, -100, -ln2, 3, 9]);
  const mask = Float32Array.from([1, 1, 0, 1, 0, 0]);
  const k2 = ln2 ** 2 / 2,
    k3 = 1 - ln2;
  const rs = (options: string, thresholds: string) =>
    rolloutRejectionMask(old, rollout, mask, 2, 3, parseRolloutRs(options, thresholds));
  // [options, thresholds, mask kept, rollout_rs_masked_fraction, rollout_rs_seq_masked_fraction]
  const cases: [string, string, number[], number, number][] = [
    // k1 keeps −lr within [log lower, log upper] (lines 259-260, 275): −ln2 < −ln1.5 goes.
    ['token_k1', '1.5', [0, 1, 0, 1, 0, 0], 1 / 3, 1 / 2],
    // …so the ratio kept is e^lr ∈ [1/upper, 1/lower]: 0.4_1.2 keeps r = 2, 0.6_3 does not.
    ['token_k1', '0.4_1.2', [1, 1, 0, 1, 0, 0], 0, 0],
    ['token_k1', '0.6_3', [0, 1, 0, 1, 0, 0], 1 / 3, 1 / 2],
    ['token_k2', '0.24', [0, 1, 0, 1, 0, 0], 1 / 3, 1 / 2],
    ['token_k2', '0.25', [1, 1, 0, 1, 0, 0], 0, 0],
    ['token_k3', '0.3', [0, 1, 0, 1, 0, 0], 1 / 3, 1 / 2],
    // Sequence options reject the whole sequence (lines 282-331): sum −ln2 < −ln1.5; mean −ln2/2 > −ln1.5.
    ['seq_sum_k1', '1.5', [0, 0, 0, 1, 0, 0], 2 / 3, 1 / 2],
    ['seq_mean_k1', '1.5', [1, 1, 0, 1, 0, 0], 0, 0],
    ['seq_mean_k1', '1.3', [0, 0, 0, 1, 0, 0], 2 / 3, 1 / 2],
    ['seq_sum_k3', '0.3', [0, 0, 0, 1, 0, 0], 2 / 3, 1 / 2],
    ['seq_mean_k3', '0.16', [1, 1, 0, 1, 0, 0], 0, 0],
    ['seq_mean_k3', '0.15', [0, 0, 0, 1, 0, 0], 2 / 3, 1 / 2],
    ['seq_max_k2', '0.24', [0, 0, 0, 1, 0, 0], 2 / 3, 1 / 2],
    ['seq_max_k3', '0.31', [1, 1, 0, 1, 0, 0], 0, 0],
    // Every option must pass (line 339): the example's pair.
    ['token_k1,seq_max_k2', '0.6_1.6,2.5', [0, 1, 0, 1, 0, 0], 1 / 3, 1 / 2],
    ['seq_max_k2,token_k3', '0.25,0.3', [0, 1, 0, 1, 0, 0], 1 / 3, 1 / 2],
  ];
  for (const [options, thresholds, kept, maskedFraction, seqMaskedFraction] of cases) {
    it(`${options} at ${thresholds}`, () => {
      const r = rs(options, thresholds);
      expect(Array.from(r.mask)).toEqual(kept);
      expect(r.metrics['rollout_corr/rollout_rs_masked_fraction']).toBeCloseTo(maskedFraction, 6);
      expect(r.metrics['rollout_corr/rollout_rs_seq_masked_fraction']).toBeCloseTo(seqMaskedFraction, 6);
    });
  }

  it("reports each option's metrics under verl's names (compute_rs_metrics, lines 375-478; lines 362-363)", () => {
    const m = rs('token_k1,seq_max_k2', '1.5,0.2').metrics;
    const l = Math.log(1.5);
    const expected: Record<string, number> = {
      // token_k1 on −ln2, 0 | 0, bounds [−ln1.5, ln1.5]; per-sequence values are masked means −ln2/2 | 0.
      'rollout_corr/rollout_rs_token_k1_mean': -ln2 / 3,
      'rollout_corr/rollout_rs_token_k1_max': 0,
      'rollout_corr/rollout_rs_token_k1_min': -ln2,
      'rollout_corr/rollout_rs_token_k1_fraction_high': 0,
      'rollout_corr/rollout_rs_token_k1_fraction_low': 1 / 3,
      'rollout_corr/rollout_rs_token_k1_std': Math.sqrt(l ** 2 / 3 - (l / 3) ** 2), // clamped to −ln1.5, 0, 0
      'rollout_corr/rollout_rs_token_k1_seq_mean': -ln2 / 4,
      'rollout_corr/rollout_rs_token_k1_seq_std': ln2 / 2 / Math.SQRT2,
      'rollout_corr/rollout_rs_token_k1_seq_max': 0,
      'rollout_corr/rollout_rs_token_k1_seq_min': -ln2 / 2,
      'rollout_corr/rollout_rs_token_k1_seq_max_deviation': ln2 / 2,
      'rollout_corr/rollout_rs_token_k1_seq_fraction_high': 0,
      'rollout_corr/rollout_rs_token_k1_seq_fraction_low': 0,
      'rollout_corr/rollout_rs_token_k1_masked_fraction': 1 / 3,
      'rollout_corr/rollout_rs_token_k1_seq_masked_fraction': 1 / 2,
      // seq_max_k2: sequence values ln2²/2 | 0 on every token of each; upper 0.2, no lower bound (no seq_fraction_low).
      'rollout_corr/rollout_rs_seq_max_k2_mean': (2 * k2) / 3,
      'rollout_corr/rollout_rs_seq_max_k2_max': k2,
      'rollout_corr/rollout_rs_seq_max_k2_min': 0,
      'rollout_corr/rollout_rs_seq_max_k2_fraction_high': 1 / 2,
      'rollout_corr/rollout_rs_seq_max_k2_fraction_low': 0,
      'rollout_corr/rollout_rs_seq_max_k2_std': Math.sqrt(0.08 / 3 - (0.4 / 3) ** 2), // clamped to 0.2, 0.2, 0
      'rollout_corr/rollout_rs_seq_max_k2_seq_mean': k2 / 2,
      'rollout_corr/rollout_rs_seq_max_k2_seq_std': k2 / Math.SQRT2,
      'rollout_corr/rollout_rs_seq_max_k2_seq_max': k2,
      'rollout_corr/rollout_rs_seq_max_k2_seq_min': 0,
      'rollout_corr/rollout_rs_seq_max_k2_seq_max_deviation': k2,
      'rollout_corr/rollout_rs_seq_max_k2_seq_fraction_high': 1 / 2,
      'rollout_corr/rollout_rs_seq_max_k2_masked_fraction': 2 / 3,
      'rollout_corr/rollout_rs_seq_max_k2_seq_masked_fraction': 1 / 2,
      'rollout_corr/rollout_rs_masked_fraction': 2 / 3,
      'rollout_corr/rollout_rs_seq_masked_fraction': 1 / 2,
    };
    expect(Object.keys(m).sort()).toEqual(Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) expect(m[key], key).toBeCloseTo(value, 5);
    expect(rs('token_k3', '0.3').metrics['rollout_corr/rollout_rs_token_k3_max']).toBeCloseTo(k3, 5);
  });

  it("the config needs the rollout's log-probs and a threshold", () => {
    expect(() =>
      planStep(
        loadConfig({
          overrides: [
            'algorithm.rollout_correction.rollout_rs=token_k1',
            'algorithm.rollout_correction.rollout_rs_threshold=2',
            'actor_rollout_ref.rollout.calculate_log_probs=false',
          ],
        }),
      ),
    ).toThrow(/calculate_log_probs=true/);
    expect(() =>
      planStep(
        loadConfig({
          overrides: [
            'algorithm.rollout_correction.rollout_rs=token_k1',
            'actor_rollout_ref.rollout.calculate_log_probs=true',
          ],
        }),
      ),
    ).toThrow(/rollout_rs_threshold/);
  });
});

describe('bypass_mode (verl compute_policy_loss_bypass_mode, core_algos.py:2064-2176)', () => {
  const bypass = [
    'actor_rollout_ref.rollout.calculate_log_probs=true',
    'algorithm.rollout_correction.bypass_mode=true',
  ];

  it(
    "keeps the rollout's log-probs as old log-probs, with no recomputation, and moves weights and rejection into " +
      "the actor's loss",
    () => {
      expect(planStep(loadConfig({ overrides: bypass })).experience.calculateLogProbs).toBe(false);
      expect(
        planStep(loadConfig({ overrides: ['actor_rollout_ref.rollout.calculate_log_probs=true'] })).experience
          .calculateLogProbs,
      ).toBe(true);
      const plan = planStep(
        loadConfig({
          overrides: [
            ...bypass,
            'algorithm.rollout_correction.rollout_is=sequence',
            'algorithm.rollout_correction.rollout_is_batch_normalize=true',
            "algorithm.rollout_correction.rollout_rs='token_k1,seq_max_k2'",
            "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6,2.5'",
          ],
        }),
      );
      expect([plan.rolloutIs, plan.rolloutRs]).toEqual([null, null]);
      expect(plan.actor.bypass).toEqual({
        lossType: 'ppo_clip',
        rolloutIs: { level: 'sequence', threshold: 2, batchNormalize: true },
        rolloutRs: parseRolloutRs('token_k1,seq_max_k2', '0.6_1.6,2.5'),
      });
      // Bypass mode needs no calculate_log_probs: this engine's sampler always returns its log-probs.
      expect(
        planStep(
          loadConfig({
            overrides: [
              'algorithm.rollout_correction.bypass_mode=true',
              'algorithm.rollout_correction.rollout_is=token',
            ],
          }),
        ).actor.bypass?.rolloutIs?.level,
      ).toBe('token');
      expect(
        planStep(loadConfig({ overrides: ['actor_rollout_ref.rollout.calculate_log_probs=true'] })).actor.bypass,
      ).toBeNull();
    },
  );

  it(
    'replaces actor.policy_loss.loss_mode by loss_type: ppo_clip runs vanilla, reinforce runs gpg (−A·log π); other ' +
      'values are refused',
    () => {
      const lossMode = (settings: string[]) =>
        planStep(
          loadConfig({ overrides: [...bypass, 'actor_rollout_ref.actor.policy_loss.loss_mode=gspo', ...settings] }),
        ).actor.policyLoss.lossMode;
      expect(lossMode([])).toBe('vanilla');
      expect(lossMode(['algorithm.rollout_correction.loss_type=reinforce'])).toBe('gpg');
      expect(() => loadConfig({ overrides: [...bypass, 'algorithm.rollout_correction.loss_type=ppo'] })).toThrow(
        /algorithm\.rollout_correction\.loss_type.*ppo_clip/,
      );
    },
  );

  // One sequence of five tokens whose current/rollout ratios are 4, 1, 1/4, 3/2 and 3/5, and a masked slot.
  const rollout = Float32Array.from([-1, -1, -1, -1, -1, -3]);
  const current = Float32Array.from([-1 + 2 * ln2, -1, -1 - 2 * ln2, -1 + Math.log(1.5), -1 + Math.log(0.6), 0]);
  const mask = Float32Array.from([1, 1, 1, 1, 1, 0]);
  const advantages = Float32Array.from([1.5, -2, 0.7, -0.4, 1, 9]);
  const tokenIs = { level: 'token' as const, threshold: 2, batchNormalize: false };
  const rejection = parseRolloutRs('token_k1', '0.5_2.0');

  it(
    "weighs against the current policy: reinforce's loss takes the truncated weights, ppo_clip only measures " + 'them',
    () => {
      const reinforce = bypassCorrection(
        { lossType: 'reinforce', rolloutIs: tokenIs, rolloutRs: null },
        current,
        rollout,
        mask,
        1,
        6,
      );
      [2, 1, 0.25, 1.5, 0.6, 0].forEach((w, i) => expect(reinforce.lossWeights![i], `weight ${i}`).toBeCloseTo(w, 5));
      expect(reinforce.policyMask).toBeNull();
      // verl 1dda039b measures the applied (truncated) weights.
      expect(reinforce.metrics['rollout_corr/rollout_is_mean']).toBeCloseTo((2 + 1 + 0.25 + 1.5 + 0.6) / 5, 5);
      const clip = bypassCorrection(
        { lossType: 'ppo_clip', rolloutIs: tokenIs, rolloutRs: null },
        current,
        rollout,
        mask,
        1,
        6,
      );
      expect(clip.lossWeights).toBeNull();
      expect(clip.metrics['rollout_corr/rollout_is_mean']).toBeCloseTo(
        reinforce.metrics['rollout_corr/rollout_is_mean'],
        10,
      );
      // compute_offpolicy_metrics of the current policy against the rollout's, over the response mask.
      expect(clip.metrics['rollout_corr/kl']).toBeCloseTo(-Math.log(1.5 * 0.6) / 5, 5);
      expect(clip.metrics['rollout_corr/training_log_ppl']).toBeCloseTo(
        -Array.from(current.subarray(0, 5)).reduce((a, v) => a + v, 0) / 5,
        5,
      );
    },
  );

  it("rejects against the current policy: the kept tokens are the policy term's mask", () => {
    const { policyMask, metrics } = bypassCorrection(
      { lossType: 'ppo_clip', rolloutIs: null, rolloutRs: rejection },
      current,
      rollout,
      mask,
      1,
      6,
    );
    expect(Array.from(policyMask!)).toEqual([0, 1, 0, 1, 1, 0]);
    expect(metrics['rollout_corr/rollout_rs_masked_fraction']).toBeCloseTo(2 / 5, 6);
    expect(metrics['rollout_corr/rollout_is_mean']).toBeUndefined();
  });

  it("reinforce's loss is verl's agg_loss(−A·log π·w) over the kept tokens, with the mini-batch's token count", () => {
    const correction = bypassCorrection(
      { lossType: 'reinforce', rolloutIs: tokenIs, rolloutRs: rejection },
      current,
      rollout,
      mask,
      1,
      6,
    );
    const result = computeActorLossRef({
      oldLogProb: rollout,
      logProb: current,
      advantages,
      responseMask: mask,
      policyMask: correction.policyMask!,
      isWeights: correction.lossWeights!,
      B: 1,
      T: 6,
      config: resolvePolicyLossConfig({ lossMode: BYPASS_LOSS_MODES.reinforce }),
      aggregation: localAggregation('token-mean', mask, 1, 6),
    });
    const weights = [2, 1, 0.25, 1.5, 0.6];
    const kept = [1, 3, 4];
    expect(result.pgLoss).toBeCloseTo(kept.reduce((a, t) => a - advantages[t] * current[t] * weights[t], 0) / 5, 6);
    kept.forEach((t) => expect(result.gradLogProb[t]).toBeCloseTo((-advantages[t] * weights[t]) / 5, 6));
    [0, 2, 5].forEach((t) => expect(Math.abs(result.gradLogProb[t])).toBe(0));
    // verl's ppo_kl here: masked_mean(rollout − current) over the kept tokens.
    expect(result.ppoKl).toBeCloseTo(-Math.log(1 * 1.5 * 0.6) / 3, 5);
  });
});
