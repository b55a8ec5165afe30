// CPU reference (float64) for kernels/ppo/kl-penalty (its elementwise and apply sections): verl's kl_penalty estimators
// and the in-reward KL penalty of ray_trainer.apply_kl_penalty. Gradients follow torch autograd, including
// clamp's inclusive pass-through band.
import { parseKlEstimator, type KlEstimator } from './ppo-vocabulary.ts';

/** [kl, d kl / d logprob] for one token. */
export function klToken(logprob: number, refLogprob: number, estimator: KlEstimator): [number, number] {
  const diff = logprob - refLogprob;
  let value: number;
  let grad: number;
  switch (estimator.code) {
    case 0:
      value = diff;
      grad = 1;
      break;
    case 1:
      value = Math.abs(diff);
      grad = Math.sign(diff);
      break;
    case 2:
      value = 0.5 * diff * diff;
      grad = diff;
      break;
    default: {
      const raw = refLogprob - logprob;
      const kl = Math.min(Math.max(raw, -20), 20);
      const dkl = raw >= -20 && raw <= 20 ? -1 : 0;
      const ratio = Math.exp(kl);
      const kld = ratio - kl - 1;
      value = Math.min(Math.max(kld, -10), 10);
      grad = kld >= -10 && kld <= 10 ? (ratio - 1) * dkl : 0;
    }
  }
  return [value, estimator.straightThrough ? diff : grad];
}

export function klPenaltyRef(
  logprob: ArrayLike<number>,
  refLogprob: ArrayLike<number>,
  name: string,
): { kl: Float64Array; grad: Float64Array } {
  const estimator = parseKlEstimator(name);
  const kl = new Float64Array(logprob.length);
  const grad = new Float64Array(logprob.length);
  for (let i = 0; i < logprob.length; i++) [kl[i], grad[i]] = klToken(logprob[i], refLogprob[i], estimator);
  return { kl, grad };
}

/**
 * token_level_rewards = scores − β·kl·mask and each row's masked mean of kl·mask (verl's current_kl before the batch
 * mean).
 */
export function applyKlPenaltyRef(args: {
  tokenLevelScores: ArrayLike<number>;
  oldLogProbs: ArrayLike<number>;
  refLogProb: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  beta: number;
  klPenalty: string;
  B: number;
  T: number;
}): { tokenLevelRewards: Float64Array; rowKl: Float64Array } {
  const { B, T } = args;
  const { kl } = klPenaltyRef(args.oldLogProbs, args.refLogProb, args.klPenalty);
  const tokenLevelRewards = new Float64Array(B * T);
  const rowKl = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    let sum = 0;
    let count = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const m = args.responseMask[i];
      const kld = kl[i] * m;
      tokenLevelRewards[i] = args.tokenLevelScores[i] - args.beta * kld;
      if (m !== 0) sum += kld * m;
      count += m;
    }
    rowKl[b] = sum / (count + 1e-8);
  }
  return { tokenLevelRewards, rowKl };
}
