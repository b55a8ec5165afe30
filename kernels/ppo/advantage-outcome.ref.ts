// CPU reference (float64) for kernels/ppo/advantage-outcome: verl's group-baseline outcome estimators. Each
// sequence's score is the plain (unmasked) sum of its token rewards; groups are verl's `index` (uid); the
// per-sequence scalar is broadcast over the response and multiplied by the mask.
import { maskedWhiten } from './masked-stats.ref.ts';
import type { OutcomeEstimator } from './ppo-vocabulary.ts';

export interface OutcomeArgs {
  tokenLevelRewards: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  /** Dense group id per sequence (0..G-1). */
  groupOf: ArrayLike<number>;
  epsilon: number;
  normAdvByStd: boolean;
  /** gpg: the divisor f_norm (verl's default 1). */
  fNorm?: number;
  /** grpo_vectorized: the floor under each group's variance (verl 1dda039b: 0; b178a3cd: epsilon). */
  varianceFloor?: number;
  B: number;
  T: number;
}

/** torch.std: unbiased. */
function std(xs: number[]): number {
  const mean = xs.reduce((a, x) => a + x, 0) / xs.length;
  return Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (xs.length - 1));
}

export function outcomeScalarsRef(estimator: OutcomeEstimator, args: OutcomeArgs): Float64Array {
  const { B, T } = args;
  const scores = new Float64Array(B);
  const lengths = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      scores[b] += args.tokenLevelRewards[b * T + t];
      lengths[b] += args.responseMask[b * T + t];
    }
  }
  const members = new Map<number, number[]>();
  for (let b = 0; b < B; b++) {
    const g = args.groupOf[b];
    if (!members.has(g)) members.set(g, []);
    members.get(g)!.push(b);
  }
  const out = new Float64Array(B);
  // gpg: α = B / (number of non-zero scores in the whole batch, at least 1).
  const alpha = B / Math.max(scores.filter((s) => s !== 0).length, 1);
  for (let b = 0; b < B; b++) {
    const group = members.get(args.groupOf[b])!;
    const n = group.length;
    const groupScores = group.map((i) => scores[i]);
    const mean = n > 1 ? groupScores.reduce((a, x) => a + x, 0) / n : 0;
    switch (estimator) {
      case 'grpo': {
        const sd = n > 1 ? std(groupScores) : 1;
        out[b] = args.normAdvByStd ? (scores[b] - mean) / (sd + args.epsilon) : scores[b] - mean;
        break;
      }
      case 'rloo':
        out[b] = n > 1 ? (scores[b] * n) / (n - 1) - (mean * n) / (n - 1) : scores[b];
        break;
      case 'opo': {
        let weighted = 0;
        let total = 0;
        for (const i of group) {
          weighted += lengths[i] * scores[i];
          total += lengths[i];
        }
        out[b] = scores[b] - (n > 1 ? weighted / total : 0);
        break;
      }
      case 'reinforce_plus_plus_baseline':
        out[b] = scores[b] - mean;
        break;
      case 'grpo_vectorized': {
        // verl.utils.groupwise.group_mean_std: the unbiased variance floored before the square root (at 0 since verl
        // 1dda039b, at ε before).
        const sd = n > 1 ? Math.sqrt(Math.max(std(groupScores) ** 2, args.varianceFloor ?? 0)) : 1;
        out[b] = args.normAdvByStd ? (scores[b] - mean) / (sd + args.epsilon) : scores[b] - mean;
        break;
      }
      case 'rloo_vectorized':
        // A singleton group's advantage is 0 here (the loop version keeps its score).
        out[b] = n > 1 ? (n * scores[b] - n * mean) / (n - 1) : 0;
        break;
      case 'gpg':
        out[b] = (alpha * (scores[b] - mean)) / (args.fNorm ?? 1);
        break;
      case 'grpo_passk': {
        if (n < 2)
          throw new Error(
            `grpo_passk: Pass@k requires at least 2 samples per group; got ${n} for group ${args.groupOf[b]}`,
          );
        let best = group[0];
        for (const i of group) if (scores[i] > scores[best]) best = i;
        let second = -Infinity;
        for (const i of group) if (i !== best && scores[i] > second) second = scores[i];
        const advantage = scores[best] - second;
        out[b] = b !== best ? 0 : args.normAdvByStd ? advantage / (std(groupScores) + args.epsilon) : advantage;
        break;
      }
    }
  }
  return out;
}

export function computeOutcomeAdvantageRef(estimator: OutcomeEstimator, args: OutcomeArgs): Float64Array {
  const scalars = outcomeScalarsRef(estimator, args);
  const broadcast = Float64Array.from(
    { length: args.B * args.T },
    (_, i) => scalars[Math.floor(i / args.T)] * args.responseMask[i],
  );
  return estimator === 'reinforce_plus_plus_baseline'
    ? maskedWhiten(broadcast, args.responseMask, true, true)
    : broadcast;
}

/** verl's compute_gdpo_outcome_advantage: each reward key's per-sequence scores (keyScores[k][b]) normalised by
 *  GRPO within their groups, summed with `weights`, then masked_whiten · mask over the response tokens. */
export function computeGdpoAdvantageRef(
  args: Omit<OutcomeArgs, 'tokenLevelRewards'> & {
    keyScores: readonly ArrayLike<number>[];
    weights: readonly number[];
  },
): Float64Array {
  const { B, T } = args;
  const sum = new Float64Array(B * T);
  args.keyScores.forEach((scores, k) => {
    const rewards = Float64Array.from({ length: B * T }, (_, i) => (i % T === 0 ? scores[Math.floor(i / T)] : 0));
    const grpo = computeOutcomeAdvantageRef('grpo', { ...args, tokenLevelRewards: rewards });
    for (let i = 0; i < B * T; i++) sum[i] += args.weights[k] * grpo[i];
  });
  return maskedWhiten(sum, args.responseMask, true, true);
}
