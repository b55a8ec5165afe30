// Finite-difference checks (float64, central differences) of the PPO references' gradients, and the
// micro-batch property of the loss aggregation.
import { describe, it, expect } from 'vitest';
import { seededRandom } from '../support/arrays.ts';
import { numericGradientError } from '../support/numeric-gradient.ts';
import { klPenaltyRef } from '../../kernels/ppo/kl-penalty.ref.ts';
import { aggLossRef, localAggregation } from '../../kernels/ppo/agg-loss.ref.ts';
import { computeActorLossRef } from '../../kernels/ppo/policy-loss.ref.ts';
import { LOSS_AGG_MODES, type LossAggregation, type PolicyLossConfig } from '../../kernels/ppo/ppo-vocabulary.ts';
import { computeValueLossRef } from '../../kernels/ppo/value-loss.ref.ts';
import { logprobEntropyRef, logprobEntropyBackwardRef } from '../../kernels/ppo/logprob-entropy.ref.ts';

const B = 5;
const T = 7;
// Ragged rows, an interior observation gap (row 3) and an empty row (row 4).
const MASK = [
  [1, 1, 1, 1, 1, 1, 1],
  [1, 1, 1, 0, 0, 0, 0],
  [1, 0, 0, 0, 0, 0, 0],
  [1, 1, 0, 0, 1, 1, 0],
  [0, 0, 0, 0, 0, 0, 0],
].flat();

function values(seed: number, scale = 1, offset = 0): Float64Array {
  const random = seededRandom(seed);
  return Float64Array.from({ length: B * T }, () => offset + (random() * 2 - 1) * scale);
}

/**
 * Max relative error of an analytic gradient against central differences of f. A copy of x is perturbed: the
 * surrogates below freeze terms at x itself.
 */
function fdError(f: (x: Float64Array) => number, x: Float64Array, grad: ArrayLike<number>): number {
  const probe = Float64Array.from(x);
  return numericGradientError(probe, () => f(probe), grad, { floor: 1e-3 });
}

/** GSPO's policy term with each sequence's log-ratio frozen at lp0, so only a token's own log-prob moves its ratio. */
function gspoSurrogate(
  x: Float64Array,
  lp0: Float64Array,
  old: Float64Array,
  adv: Float64Array,
  config: PolicyLossConfig,
  agg: LossAggregation,
): number {
  let loss = 0;
  for (let b = 0; b < B; b++) {
    let count = 0;
    let logRatio = 0;
    for (let t = 0; t < T; t++) {
      count += MASK[b * T + t];
      logRatio += (lp0[b * T + t] - old[b * T + t]) * MASK[b * T + t];
    }
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      if (MASK[i] === 0) continue;
      const ratio = Math.exp(Math.min(logRatio / Math.max(count, 1) + x[i] - lp0[i], 10));
      const clipped = Math.min(Math.max(ratio, 1 - config.clipRatioLow), 1 + config.clipRatioHigh);
      loss += (Math.max(-adv[i] * ratio, -adv[i] * clipped) / (count + 1e-8)) * (agg.dpSize / agg.globalBatchSize);
    }
  }
  return loss;
}

describe('PPO reference gradients', () => {
  for (const name of ['kl', 'abs', 'mse', 'low_var_kl']) {
    it(`kl_penalty ${name}`, () => {
      const ref = values(2, 0.5);
      const lp = values(1, 0.5, 0.01);
      const { grad } = klPenaltyRef(lp, ref, name);
      expect(fdError((x) => klPenaltyRef(x, ref, name).kl.reduce((a, v) => a + v, 0), lp, grad)).toBeLessThan(1e-6);
    });
  }

  const configs: [string, PolicyLossConfig][] = [
    ['vanilla', { lossMode: 'vanilla', clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 }],
    ['gspo', { lossMode: 'gspo', clipRatioLow: 3e-4, clipRatioHigh: 4e-4, clipRatioC: 3 }],
  ];
  for (const [label, config] of configs) {
    for (const mode of LOSS_AGG_MODES) {
      it(`actor loss ${label} ${mode} with entropy bonus and KL loss`, () => {
        const old = values(3, 0.3, -1);
        const lp = values(4, 0.3, -1);
        const adv = values(5, 2);
        const entropy = values(6, 1, 2);
        const refLogProb = values(7, 0.3, -1);
        const aggregation = localAggregation(mode, MASK, B, T);
        const run = (x: Float64Array, e = entropy) =>
          computeActorLossRef({
            oldLogProb: old,
            logProb: x,
            advantages: adv,
            responseMask: MASK,
            B,
            T,
            config,
            aggregation,
            terms: { entropyCoeff: 0.01, entropy: e, klLossCoef: 0.1, klLossType: 'low_var_kl', refLogProb },
          });
        const result = run(lp);
        // GSPO's ratio is straight-through (log s_t = sg[seq log-ratio] + log_prob − sg[log_prob]): its gradient is
        // that of the surrogate in which a token's own log-prob moves the ratio and the sequence term stays fixed.
        const objective =
          config.lossMode === 'gspo'
            ? (x: Float64Array) =>
                run(x).policyLoss - run(x).pgLoss + gspoSurrogate(x, lp, old, adv, config, aggregation)
            : (x: Float64Array) => run(x).policyLoss;
        expect(fdError(objective, lp, result.gradLogProb)).toBeLessThan(1e-6);
        expect(fdError((e) => run(lp, e).policyLoss, entropy, result.gradEntropy)).toBeLessThan(1e-6);
      });
    }
  }

  // Each newer loss mode; clip_cov/kl_cov with a fixed selection (the host's pick is an input, not a function of
  // the log-probs the gradient moves). CISPO's clipped ratio is detached: its gradient is that of the surrogate
  // with the ratio frozen at the evaluation point.
  const newModes: PolicyLossConfig[] = [
    { lossMode: 'gpg', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3 },
    { lossMode: 'geo_mean', clipRatioLow: 0.1, clipRatioHigh: 0.15, clipRatioC: 3 },
    { lossMode: 'cispo', clipRatioLow: 0.1, clipRatioHigh: 0.15, clipRatioC: 3 },
    { lossMode: 'sapo', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, tauPos: 1, tauNeg: 1.05 },
    { lossMode: 'clip_cov', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3 },
    { lossMode: 'kl_cov', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, ppoKlCoef: 0.3 },
    // verl 1dda039b's: DPPO's thresholds are on the probability's move (TV, binary KL), c truncates the ratio.
    { lossMode: 'dppo_tv', clipRatioLow: 0.05, clipRatioHigh: 0.04, clipRatioC: 1.1 },
    { lossMode: 'dppo_kl', clipRatioLow: 0.01, clipRatioHigh: 0.008, clipRatioC: 1.1 },
    { lossMode: 'dro', clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, droBeta: 0.7 },
  ];
  for (const config of newModes) {
    it(`actor loss ${config.lossMode} with entropy bonus and KL loss`, () => {
      const old = values(3, 0.3, -1);
      const lp = values(4, 0.3, -1);
      const adv = values(5, 2);
      const entropy = values(6, 1, 2);
      const refLogProb = values(7, 0.3, -1);
      const selected = Float64Array.from({ length: B * T }, (_, i) => (i % 3 === 0 ? 1 : 0));
      const aggregation = localAggregation('seq-mean-token-mean', MASK, B, T);
      const run = (x: Float64Array, e = entropy) =>
        computeActorLossRef({
          oldLogProb: old,
          logProb: x,
          advantages: adv,
          responseMask: MASK,
          B,
          T,
          config,
          aggregation,
          selected,
          terms: { entropyCoeff: 0.01, entropy: e, klLossCoef: 0.1, klLossType: 'low_var_kl', refLogProb },
        });
      const result = run(lp);
      // The loss with its detached factor frozen at lp: Σ weight·coefficient·x (cispo: its clipped ratio; DPPO: the
      // truncated ratio and the valid mask, restated here from verl's formulas).
      const coefficient = (i: number): number | null => {
        const ratio = Math.exp(lp[i] - old[i]);
        if (config.lossMode === 'cispo')
          return -Math.min(Math.max(ratio, 1 - config.clipRatioLow), 1 + config.clipRatioHigh) * adv[i];
        if (config.lossMode !== 'dppo_tv' && config.lossMode !== 'dppo_kl') return null;
        const p = Math.exp(lp[i]),
          pOld = Math.exp(old[i]);
        const binaryKl = pOld * (old[i] - lp[i]) + (1 - pOld) * Math.log((1 - pOld + 1e-8) / (1 - p + 1e-8));
        const valid =
          config.lossMode === 'dppo_tv'
            ? adv[i] > 0
              ? p - pOld <= config.clipRatioHigh
              : p - pOld >= -config.clipRatioLow
            : adv[i] > 0
              ? binaryKl <= config.clipRatioHigh || p <= pOld
              : binaryKl <= config.clipRatioLow || p >= pOld;
        return -adv[i] * Math.min(ratio, config.clipRatioC) * (valid ? 1 : 0);
      };
      const frozen = (x: Float64Array) => {
        let loss = 0;
        for (let b = 0; b < B; b++) {
          const count = MASK.slice(b * T, (b + 1) * T).reduce((a, v) => a + v, 0);
          for (let t = 0; t < T; t++) {
            const i = b * T + t;
            loss +=
              ((MASK[i] * coefficient(i)! * x[i]) / (count + 1e-8)) *
              (aggregation.dpSize / aggregation.globalBatchSize);
          }
        }
        return loss;
      };
      const objective =
        coefficient(0) !== null
          ? (x: Float64Array) => run(x).policyLoss - run(x).pgLoss + frozen(x)
          : (x: Float64Array) => run(x).policyLoss;
      if (config.lossMode.startsWith('dppo')) {
        // Both sides of the thresholds and of the truncation occur, so the check tells the regimes apart.
        expect(result.pgClipfrac).toBeGreaterThan(0);
        expect(result.pgClipfrac).toBeLessThan(1);
        expect(result.pgClipfracLower).toBeGreaterThan(0);
      }
      expect(fdError(objective, lp, result.gradLogProb)).toBeLessThan(1e-6);
      expect(Number.isFinite(result.pgLoss)).toBe(true);
    });
  }

  // Bypass-mode rejection sampling (verl's compute_policy_loss_bypass_mode): the policy term runs over the effective
  // mask mask·policyMask — as if the rejected tokens had left the response mask, with the mini-batch's
  // denominators unchanged — while entropy and KL keep the whole mask. Row 1 loses every token.
  const policyMask = Float64Array.from({ length: B * T }, (_, i) => (Math.floor(i / T) === 1 || i % 4 === 2 ? 0 : 1));
  for (const lossMode of ['vanilla', 'gpg'] as const) {
    for (const mode of ['token-mean', 'seq-mean-token-mean'] as const) {
      it(
        `actor loss ${lossMode} ${mode} with a bypass policy mask: the policy term over the kept tokens, entropy ` +
          `and KL over all`,
        () => {
          const config: PolicyLossConfig = { lossMode, clipRatioLow: 0.2, clipRatioHigh: 0.28, clipRatioC: 3 };
          const old = values(12, 0.3, -1);
          const lp = values(13, 0.3, -1);
          const adv = values(14, 2);
          const entropy = values(15, 1, 2);
          const refLogProb = values(16, 0.3, -1);
          const aggregation = localAggregation(mode, MASK, B, T);
          const terms = { entropyCoeff: 0.01, entropy, klLossCoef: 0.1, klLossType: 'low_var_kl', refLogProb };
          const run = (x: Float64Array, responseMask: ArrayLike<number>, masked?: ArrayLike<number>) =>
            computeActorLossRef({
              oldLogProb: old,
              logProb: x,
              advantages: adv,
              responseMask,
              B,
              T,
              config,
              aggregation,
              terms,
              policyMask: masked,
            });
          const result = run(lp, MASK, policyMask);
          const effective = run(
            lp,
            MASK.map((m, i) => m * policyMask[i]),
          );
          const whole = run(lp, MASK);
          expect(effective.pgLoss).not.toBeCloseTo(whole.pgLoss, 3);
          for (const key of ['pgLoss', 'pgClipfrac', 'ppoKl', 'pgClipfracLower'] as const)
            expect(result[key], key).toBeCloseTo(effective[key], 12);
          expect(result.entropyAgg).toBeCloseTo(whole.entropyAgg, 12);
          expect(result.klLoss).toBeCloseTo(whole.klLoss, 12);
          expect(fdError((x) => run(x, MASK, policyMask).policyLoss, lp, result.gradLogProb)).toBeLessThan(1e-6);
          expect(
            fdError(
              (e) =>
                computeActorLossRef({
                  oldLogProb: old,
                  logProb: lp,
                  advantages: adv,
                  responseMask: MASK,
                  B,
                  T,
                  config,
                  aggregation,
                  terms: { ...terms, entropy: e },
                  policyMask,
                }).policyLoss,
              entropy,
              result.gradEntropy,
            ),
          ).toBeLessThan(1e-6);
        },
      );
    }
  }

  it('value loss', () => {
    const vpreds = values(8, 1);
    const returns = values(9, 1);
    const old = values(10, 1);
    const aggregation = localAggregation('seq-mean-token-mean', MASK, B, T);
    const run = (x: Float64Array) =>
      computeValueLossRef({
        vpreds: x,
        returns,
        values: old,
        responseMask: MASK,
        cliprangeValue: 0.3,
        B,
        T,
        aggregation,
      });
    expect(fdError((x) => run(x).vfLoss, vpreds, run(vpreds).gradVpreds)).toBeLessThan(1e-6);
  });

  it('log-prob and entropy from logits', () => {
    const N = 6;
    const V = 9;
    const random = seededRandom(11);
    const logits = Float64Array.from({ length: N * V }, () => random() * 6 - 3);
    const labels = Array.from({ length: N }, (_, n) => (n * 5) % V);
    const gLogProb = Array.from({ length: N }, () => random() - 0.5);
    const gEntropy = Array.from({ length: N }, () => random() - 0.5);
    const loss = (x: Float64Array) => {
      const { logProb, entropy } = logprobEntropyRef(x, labels, N, V);
      return logProb.reduce((a, v, n) => a + v * gLogProb[n] + entropy[n] * gEntropy[n], 0);
    };
    expect(fdError(loss, logits, logprobEntropyBackwardRef(logits, labels, gLogProb, gEntropy, N, V))).toBeLessThan(
      1e-6,
    );
  });
});

describe('loss aggregation across micro-batches', () => {
  for (const mode of LOSS_AGG_MODES) {
    it(`${mode}: micro-batch losses and gradients sum to the mini-batch's`, () => {
      const loss = values(12, 1);
      const whole = localAggregation(mode, MASK, B, T);
      const full = aggLossRef(loss, MASK, B, T, whole);
      let sum = 0;
      const grad = new Float64Array(B * T);
      for (const [start, rows] of [
        [0, 2],
        [2, 1],
        [3, 2],
      ]) {
        const slice = (a: ArrayLike<number>) => Array.from(a).slice(start * T, (start + rows) * T);
        // The global denominators come from the whole mini-batch; only the loss_scale_factor default (T) is local.
        const micro: LossAggregation = { ...whole };
        const part = aggLossRef(slice(loss), slice(MASK), rows, T, micro);
        sum += part.loss;
        grad.set(part.grad, start * T);
      }
      expect(Math.abs(sum - full.loss)).toBeLessThan(1e-12);
      grad.forEach((g, i) => expect(Math.abs(g - full.grad[i])).toBeLessThan(1e-12));
    });
  }

  it('verl defaults: local token count, local non-empty rows, response length', () => {
    expect(localAggregation('token-mean', MASK, B, T)).toEqual({
      mode: 'token-mean',
      batchNumTokens: 15,
      globalBatchSize: 4,
      lossScaleFactor: T,
      dpSize: 1,
    });
    expect(() => localAggregation('token-sum-mean', MASK, B, T)).toThrow(/Invalid loss_agg_mode/);
  });
});
