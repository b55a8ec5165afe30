// CPU reference (float64) for kernels/ppo/policy-loss: verl's compute_policy_loss_{vanilla (dual-clip PPO), gspo,
// gpg, geo_mean (GMPO), cispo, sapo, clip_cov, kl_cov, dppo_tv, dppo_kl, dro} (verl 1dda039b), composed into the
// actor loss of dp_actor.update_policy:
//   policy_loss = pg_loss − entropy_coeff·agg(entropy) + kl_loss_coef·agg(kl_penalty(log_prob, ref_log_prob)).
// Gradients follow torch autograd exactly: clamp passes gradient on its closed interval, and torch.maximum /
// torch.min split the gradient in half on ties (which is what happens inside the clip band); detach() (cispo's
// clipped ratio) passes none. clip_cov/kl_cov take their token selection as input (covariance-selection.ts), and
// bypass mode's rejection sampling its kept tokens (policyMask). Rollout correction's importance weights (isWeights,
// verl's rollout_is_weights) multiply each token's policy loss after its metrics are taken — geo_mean's sequence
// loss by the geometric mean of its tokens' weights — as verl's compute_policy_loss_<mode> does.
import { aggWeight } from './agg-loss.ref.ts';
import { klToken } from './kl-penalty.ref.ts';
import { parseKlEstimator, type LossAggregation, type PolicyLossConfig } from './ppo-vocabulary.ts';
import { lossModeSpec } from './policy-loss-modes.ts';

export interface ActorLossTerms {
  entropyCoeff: number;
  /** Per-token entropy [B, T]; omit to leave the entropy term out. */
  entropy?: ArrayLike<number>;
  klLossCoef: number;
  klLossType: string;
  /** Reference log-probs [B, T]; omit to leave the KL loss out. */
  refLogProb?: ArrayLike<number>;
}

export interface PolicyLossResult {
  pgLoss: number;
  pgClipfrac: number;
  ppoKl: number;
  pgClipfracLower: number;
  entropyAgg: number;
  klLoss: number;
  policyLoss: number;
  /** d policy_loss / d log_prob. */
  gradLogProb: Float64Array;
  /** d policy_loss / d entropy (the coefficient the LM-head backward multiplies into d entropy / d logits). */
  gradEntropy: Float64Array;
}

/** max(a, b) with its two partial derivatives as torch.maximum defines them. */
function maxGrad(a: number, da: number, b: number, db: number): [number, number] {
  return a > b ? [a, da] : a < b ? [b, db] : [a, 0.5 * (da + db)];
}

/** min(a, b) with torch.minimum's partial derivatives. */
function minGrad(a: number, da: number, b: number, db: number): [number, number] {
  return a < b ? [a, da] : a > b ? [b, db] : [a, 0.5 * (da + db)];
}

/**
 * GMPO's token log-ratio: sgn(A)·min(sgn(A)·r, sgn(A)·clamp(r, −low, high)), its derivative, and whether clamp moved r.
 */
export function geoMeanLogRatio(raw: number, a: number, low: number, high: number): [number, number, boolean] {
  const sgn = Math.sign(a);
  const [c, dc] = clampGrad(raw, 1, -low, high);
  const [mn, dmn] = minGrad(sgn * raw, sgn, sgn * c, sgn * dc);
  return [sgn * mn, sgn * dmn, raw !== c];
}

function clampGrad(x: number, dx: number, lo: number, hi: number): [number, number] {
  return [Math.min(Math.max(x, lo), hi), x >= lo && x <= hi ? dx : 0];
}

export function computeActorLossRef(args: {
  oldLogProb: ArrayLike<number>;
  logProb: ArrayLike<number>;
  advantages: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  B: number;
  T: number;
  config: PolicyLossConfig;
  aggregation: LossAggregation;
  terms?: ActorLossTerms;
  /** clip_cov / kl_cov: the 0/1 token selection (selectCovarianceTokens). */
  selected?: ArrayLike<number>;
  /** Bypass-mode rejection sampling: the 0/1 tokens kept; the policy term, its aggregation and its metrics run over
   *  responseMask × policyMask (verl's effective mask), entropy and KL over responseMask. */
  policyMask?: ArrayLike<number>;
  /** verl's rollout_is_weights [B, T]: each token's policy loss times its weight; geo_mean's sequence loss times
   *  exp(Σ log(w + 1e-10)·mask / (Σ mask + 1e-8)). The metrics stay those of the unweighted loss. */
  isWeights?: ArrayLike<number>;
  /**
   * geo_mean: its loss is a mean over sequences; the number of them (default B; the trainer passes the mini-batch's).
   */
  geoMeanRows?: number;
}): PolicyLossResult {
  const { B, T, config, aggregation } = args;
  const mode = config.lossMode;
  if ((mode === 'clip_cov' || mode === 'kl_cov') && !args.selected)
    throw new Error(`policy loss ${mode}: the token selection is missing`);
  const terms = args.terms ?? { entropyCoeff: 0, klLossCoef: 0, klLossType: 'low_var_kl' };
  const kl = terms.refLogProb ? parseKlEstimator(terms.klLossType) : null;
  // GSPO and SAPO always aggregate their policy term as seq-mean-token-mean; entropy and KL keep the configured mode.
  const fixed = lossModeSpec(mode)?.fixedAggregation;
  const pgAggregation: LossAggregation = fixed ? { ...aggregation, mode: fixed } : aggregation;
  const low = config.clipRatioLow,
    high = config.clipRatioHigh;
  const gradLogProb = new Float64Array(B * T);
  const gradEntropy = new Float64Array(B * T);
  let pgLoss = 0,
    clipped = 0,
    clippedLower = 0,
    ppoKlSum = 0,
    count = 0,
    entropyAgg = 0,
    klLoss = 0;
  for (let b = 0; b < B; b++) {
    let rowCount = 0,
      policyRowCount = 0,
      rowLogRatio = 0,
      rowGeoLogRatio = 0,
      rowAdvantage = 0,
      rowLogWeight = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const raw = args.logProb[i] - args.oldLogProb[i];
      rowCount += args.responseMask[i];
      policyRowCount += args.responseMask[i] * (args.policyMask ? args.policyMask[i] : 1);
      rowLogRatio += raw * args.responseMask[i];
      rowGeoLogRatio += geoMeanLogRatio(raw, args.advantages[i], low, high)[0] * args.responseMask[i];
      rowAdvantage += args.advantages[i] * args.responseMask[i];
      if (args.isWeights) rowLogWeight += Math.log(args.isWeights[i] + 1e-10) * args.responseMask[i];
    }
    const seqLogRatio = rowLogRatio / Math.max(rowCount, 1);
    // geo_mean: −Ā·exp(mean clipped log-ratio) per sequence, averaged over the sequences.
    const geoRatio = Math.exp(rowGeoLogRatio / (rowCount + 1e-8));
    const geoAdvantage = rowAdvantage / (rowCount + 1e-8);
    const geoIsWeight = Math.exp(rowLogWeight / (rowCount + 1e-8));
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const m = args.responseMask[i];
      const a = args.advantages[i];
      const raw = args.logProb[i] - args.oldLogProb[i];
      const lp = args.logProb[i];
      const sel = args.selected ? args.selected[i] : 0;
      // The ±20-clamped ratio of vanilla, cispo and sapo.
      const [nkl, dnkl] = clampGrad(raw, 1, -20, 20);
      const ratio20 = Math.exp(nkl),
        dratio20 = ratio20 * dnkl;
      let loss: number,
        dloss: number,
        clip = false,
        clipLower = false,
        negKl = raw;
      let pgWeightOverride: number | null = null;
      let isWeight = args.isWeights ? args.isWeights[i] : 1;
      if (mode === 'vanilla') {
        negKl = nkl;
        const [cr, dcr] = clampGrad(ratio20, dratio20, 1 - low, 1 + high);
        const l1 = -a * ratio20,
          l2 = -a * cr;
        clip = l2 > l1;
        const [c1, dc1] = maxGrad(l1, -a * dratio20, l2, -a * dcr);
        const l3 = -a * config.clipRatioC;
        // torch.min(l3, c1): l3 carries no gradient.
        const [c2, dc2] = c1 < l3 ? [c1, dc1] : c1 > l3 ? [l3, 0] : [c1, 0.5 * dc1];
        clipLower = c1 > l3 && a < 0;
        [loss, dloss] = a < 0 ? [c2, dc2] : [c1, dc1];
      } else if (mode === 'gspo') {
        const [logRatio, dlog] = clampGrad(seqLogRatio, 1, -Infinity, 10);
        const ratio = Math.exp(logRatio);
        const dratio = ratio * dlog;
        const [cr, dcr] = clampGrad(ratio, dratio, 1 - low, 1 + high);
        const l1 = -a * ratio,
          l2 = -a * cr;
        clip = l2 > l1;
        [loss, dloss] = maxGrad(l1, -a * dratio, l2, -a * dcr);
      } else if (mode === 'gpg') {
        [loss, dloss] = [-lp * a, -a];
      } else if (mode === 'geo_mean') {
        const [, dgeo, moved] = geoMeanLogRatio(raw, a, low, high);
        [loss, dloss] = [-geoAdvantage * geoRatio, -geoAdvantage * geoRatio * dgeo];
        clip = moved && a > 0;
        clipLower = moved && a < 0;
        pgWeightOverride = m / ((rowCount + 1e-8) * (args.geoMeanRows ?? B));
        isWeight = geoIsWeight;
      } else if (mode === 'cispo') {
        negKl = nkl;
        const cr = Math.min(Math.max(ratio20, 1 - low), 1 + high);
        [loss, dloss] = [-cr * a * lp, -cr * a];
        clip = cr !== ratio20;
      } else if (mode === 'sapo') {
        negKl = nkl;
        const tau = a > 0 ? config.tauPos! : config.tauNeg!;
        const s = 1 / (1 + Math.exp(-tau * (ratio20 - 1)));
        [loss, dloss] = [-s * (4 / tau) * a, -a * 4 * s * (1 - s) * dratio20];
      } else if (mode === 'clip_cov') {
        const ratio = Math.exp(raw);
        const [cr, dcr] = clampGrad(ratio, ratio, 1 - low, 1 + high);
        const [c, dc] = maxGrad(-a * ratio, -a * ratio, -a * cr, -a * dcr);
        [loss, dloss] = [c * (1 - sel), dc * (1 - sel)];
        clip = sel !== 0;
      } else if (mode === 'dppo_tv' || mode === 'dppo_kl') {
        // DPPO-Binary: the trust region is a threshold on how far the token's probability moved (TV or binary KL);
        // the ratio, truncated at clip_ratio_c, and the valid mask are detached.
        negKl = nkl;
        const old = args.oldLogProb[i];
        const p = Math.exp(lp),
          pOld = Math.exp(old);
        let valid: boolean;
        if (mode === 'dppo_tv') valid = a > 0 ? p - pOld <= high : p - pOld >= -low;
        else {
          const binaryKl = pOld * (old - lp) + (1 - pOld) * Math.log((1 - pOld + 1e-8) / (1 - p + 1e-8));
          valid = a > 0 ? binaryKl <= high || p <= pOld : binaryKl <= low || p >= pOld;
        }
        const coefficient = -a * Math.min(ratio20, config.clipRatioC) * (valid ? 1 : 0);
        [loss, dloss] = [coefficient * lp, coefficient];
        clip = !valid;
        clipLower = valid && ratio20 > config.clipRatioC;
      } else if (mode === 'dro') {
        // −(log π·A − β/2·r²), r unclamped; actor/ppo_kl = mean(−r), also unclamped.
        const beta = config.droBeta!;
        [loss, dloss] = [-(lp * a - 0.5 * beta * raw * raw), -a + beta * raw];
      } else {
        const ratio = Math.exp(raw);
        [loss, dloss] = [
          -a * ratio + sel * config.ppoKlCoef! * Math.abs(raw),
          -a * ratio + sel * config.ppoKlCoef! * Math.sign(raw),
        ];
        // kl_cov reports mean |log-ratio| as actor/ppo_kl.
        negKl = -Math.abs(raw);
      }
      if (m === 0) continue;
      loss *= isWeight;
      dloss *= isWeight;
      const pm = m * (args.policyMask ? args.policyMask[i] : 1);
      const pgWeight = pgWeightOverride ?? aggWeight(pgAggregation, pm, policyRowCount);
      const weight = aggWeight(aggregation, m, rowCount);
      pgLoss += pgWeight * loss;
      gradLogProb[i] = pgWeight * dloss;
      count += pm;
      if (clip) clipped += pm;
      if (clipLower) clippedLower += pm;
      ppoKlSum -= negKl * pm;
      if (terms.entropy) {
        entropyAgg += weight * terms.entropy[i];
        gradEntropy[i] = -terms.entropyCoeff * weight;
      }
      if (kl && terms.refLogProb) {
        const [value, grad] = klToken(args.logProb[i], terms.refLogProb[i], kl);
        klLoss += weight * value;
        gradLogProb[i] += terms.klLossCoef * weight * grad;
      }
    }
  }
  return {
    pgLoss,
    pgClipfrac: clipped / (count + 1e-8),
    ppoKl: ppoKlSum / (count + 1e-8),
    pgClipfracLower: clippedLower / (count + 1e-8),
    entropyAgg,
    klLoss,
    policyLoss: pgLoss - terms.entropyCoeff * entropyAgg + terms.klLossCoef * klLoss,
    gradLogProb,
    gradEntropy,
  };
}
