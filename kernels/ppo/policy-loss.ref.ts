// CPU reference (float64) for kernels/ppo/policy-loss: verl's compute_policy_loss_vanilla (dual-clip PPO) and
// compute_policy_loss_gspo, composed into the actor loss of dp_actor.update_policy:
//   policy_loss = pg_loss − entropy_coeff·agg(entropy) + kl_loss_coef·agg(kl_penalty(log_prob, ref_log_prob)).
// Gradients follow torch autograd exactly: clamp passes gradient on its closed interval, and torch.maximum /
// torch.min split the gradient in half on ties (which is what happens inside the clip band).
import { aggWeight } from './agg-loss.ref.ts';
import { klToken } from './kl-penalty.ref.ts';
import { parseKlEstimator, type LossAggregation, type PolicyLossConfig } from './ppo-vocabulary.ts';

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

function clampGrad(x: number, dx: number, lo: number, hi: number): [number, number] {
  return [Math.min(Math.max(x, lo), hi), x >= lo && x <= hi ? dx : 0];
}

export function computeActorLossRef(args: {
  oldLogProb: ArrayLike<number>; logProb: ArrayLike<number>; advantages: ArrayLike<number>; responseMask: ArrayLike<number>;
  B: number; T: number; config: PolicyLossConfig; aggregation: LossAggregation; terms?: ActorLossTerms;
}): PolicyLossResult {
  const { B, T, config, aggregation } = args;
  const terms = args.terms ?? { entropyCoeff: 0, klLossCoef: 0, klLossType: 'low_var_kl' };
  const kl = terms.refLogProb ? parseKlEstimator(terms.klLossType) : null;
  // GSPO always aggregates its policy term as seq-mean-token-mean; entropy and KL keep the configured mode.
  const pgAggregation: LossAggregation = config.lossMode === 'gspo' ? { ...aggregation, mode: 'seq-mean-token-mean' } : aggregation;
  const gradLogProb = new Float64Array(B * T);
  const gradEntropy = new Float64Array(B * T);
  let pgLoss = 0, clipped = 0, clippedLower = 0, ppoKlSum = 0, count = 0, entropyAgg = 0, klLoss = 0;
  for (let b = 0; b < B; b++) {
    let rowCount = 0;
    let rowLogRatio = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      rowCount += args.responseMask[i];
      rowLogRatio += (args.logProb[i] - args.oldLogProb[i]) * args.responseMask[i];
    }
    const seqLogRatio = rowLogRatio / Math.max(rowCount, 1);
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const m = args.responseMask[i];
      const a = args.advantages[i];
      const raw = args.logProb[i] - args.oldLogProb[i];
      let loss: number, dloss: number, clip: boolean, clipLower = false, negKl: number;
      if (config.lossMode === 'vanilla') {
        const [nkl, dnkl] = clampGrad(raw, 1, -20, 20);
        negKl = nkl;
        const ratio = Math.exp(nkl);
        const dratio = ratio * dnkl;
        const [cr, dcr] = clampGrad(ratio, dratio, 1 - config.clipRatioLow, 1 + config.clipRatioHigh);
        const l1 = -a * ratio, l2 = -a * cr;
        clip = l2 > l1;
        const [c1, dc1] = maxGrad(l1, -a * dratio, l2, -a * dcr);
        const l3 = -a * config.clipRatioC;
        // torch.min(l3, c1): l3 carries no gradient.
        const [c2, dc2] = c1 < l3 ? [c1, dc1] : c1 > l3 ? [l3, 0] : [c1, 0.5 * dc1];
        clipLower = c1 > l3 && a < 0;
        [loss, dloss] = a < 0 ? [c2, dc2] : [c1, dc1];
      } else {
        negKl = raw;
        const [logRatio, dlog] = clampGrad(seqLogRatio, 1, -Infinity, 10);
        const ratio = Math.exp(logRatio);
        const dratio = ratio * dlog;
        const [cr, dcr] = clampGrad(ratio, dratio, 1 - config.clipRatioLow, 1 + config.clipRatioHigh);
        const l1 = -a * ratio, l2 = -a * cr;
        clip = l2 > l1;
        [loss, dloss] = maxGrad(l1, -a * dratio, l2, -a * dcr);
      }
      if (m === 0) continue;
      const pgWeight = aggWeight(pgAggregation, m, rowCount);
      const weight = aggWeight(aggregation, m, rowCount);
      pgLoss += pgWeight * loss;
      gradLogProb[i] = pgWeight * dloss;
      count += m;
      if (clip) clipped += m;
      if (clipLower) clippedLower += m;
      ppoKlSum -= negKl * m;
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
