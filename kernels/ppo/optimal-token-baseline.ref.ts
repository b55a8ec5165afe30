// CPU reference (float64) for kernels/ppo/optimal-token-baseline: verl's compute_optimal_token_baseline_advantage.
// Per group and column t: B_t = Σ G_t·W_t·mask / (Σ W_t·mask + ε), W_t the cumulative Σ (1 − 2π + Σπ²)·ρ²·mask,
// G_t the reward-to-go; advantages (G − B)·mask, returns G. A one-member group has no baseline; handle_zero_tail
// zeroes the baseline of a group's single longest response from the second-longest length's column on.
import { zeroTailStarts } from './zero-tail.ts';

export interface OptimalTokenBaselineArgs {
  tokenLevelRewards: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  /** Dense group id per sequence. */
  groupOf: ArrayLike<number>;
  oldLogProbs: ArrayLike<number>;
  /** Σ_v π_v² per token. */
  sumPiSquared: ArrayLike<number>;
  rolloutIsWeights?: ArrayLike<number>;
  handleZeroTail: boolean;
  epsilon: number;
  B: number;
  T: number;
}

export function computeOptimalTokenBaselineRef(a: OptimalTokenBaselineArgs): { advantages: Float64Array; returns: Float64Array } {
  const { B, T } = a;
  const returns = new Float64Array(B * T);
  const weight = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    let toGo = 0;
    for (let t = T - 1; t >= 0; t--) {
      toGo += a.tokenLevelRewards[b * T + t] * a.responseMask[b * T + t];
      returns[b * T + t] = toGo;
    }
    let cumulative = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const rho = a.rolloutIsWeights ? a.rolloutIsWeights[i] : 1;
      cumulative += (1 - 2 * Math.exp(a.oldLogProbs[i]) + a.sumPiSquared[i]) * rho * rho * a.responseMask[i];
      weight[i] = cumulative;
    }
  }
  const tail = zeroTailStarts(a.responseMask, a.groupOf, B, T, a.handleZeroTail);
  const advantages = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    const members: number[] = [];
    for (let k = 0; k < B; k++) if (a.groupOf[k] === a.groupOf[b]) members.push(k);
    for (let t = 0; t < T; t++) {
      let baseline = 0;
      if (members.length > 1 && t < tail[b]) {
        let numerator = 0, denominator = 0;
        for (const k of members) {
          const j = k * T + t;
          numerator += returns[j] * weight[j] * a.responseMask[j];
          denominator += weight[j] * a.responseMask[j];
        }
        baseline = numerator / (denominator + a.epsilon);
      }
      advantages[b * T + t] = (returns[b * T + t] - baseline) * a.responseMask[b * T + t];
    }
  }
  return { advantages, returns };
}
