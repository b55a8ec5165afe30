// CPU reference (float64) for kernels/ppo/optimal-token-baseline: verl's compute_optimal_token_baseline_advantage
// and compute_multi_turn_optimal_token_baseline_advantage (tir_optimal_token_baseline), each ported as verl writes it.
// Both: G_t the reward-to-go, W_t the cumulative Σ (1 − 2π + Σπ²)·ρ²·mask, a per-position group baseline
// B = Σ G·W / (Σ W + ε), advantages (G − B)·mask, returns G; a one-member group has no baseline; handle_zero_tail
// zeroes the baseline of a group's single longest response from the second-longest length on. OTB takes B per
// column; TIR per position among each row's masked tokens compacted (a multi-turn mask has interior zeros where
// tool outputs sit), leaving rows with no masked token out of their group, and scatters back to the masked columns.
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

/** G (the reward-to-go) and W (the cumulative path-variance proxy), both [B, T]: verl's steps before the grouping. */
function returnsAndPathWeights(a: OptimalTokenBaselineArgs): { returns: Float64Array; weight: Float64Array } {
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
  return { returns, weight };
}

/** Each group's members in row order (verl's prompt_groups). */
function groups(groupOf: ArrayLike<number>, B: number): number[][] {
  const members = new Map<number, number[]>();
  for (let b = 0; b < B; b++) members.set(groupOf[b], [...(members.get(groupOf[b]) ?? []), b]);
  return [...members.values()];
}

export function computeOptimalTokenBaselineRef(a: OptimalTokenBaselineArgs): {
  advantages: Float64Array;
  returns: Float64Array;
} {
  const { B, T } = a;
  const { returns, weight } = returnsAndPathWeights(a);
  const tail = zeroTailStarts(a.responseMask, a.groupOf, B, T, a.handleZeroTail);
  const baselines = new Float64Array(B * T);
  for (const members of groups(a.groupOf, B)) {
    if (members.length === 1) continue;
    for (let t = 0; t < T; t++) {
      let numerator = 0,
        denominator = 0;
      for (const k of members) {
        const j = k * T + t;
        numerator += returns[j] * weight[j] * a.responseMask[j];
        denominator += weight[j] * a.responseMask[j];
      }
      for (const b of members) if (t < tail[b]) baselines[b * T + t] = numerator / (denominator + a.epsilon);
    }
  }
  const advantages = returns.map((g, i) => (g - baselines[i]) * a.responseMask[i]);
  return { advantages, returns };
}

/** verl's tir_optimal_token_baseline (handle_zero_tail defaults to true there). */
export function computeMultiTurnOptimalTokenBaselineRef(a: OptimalTokenBaselineArgs): {
  advantages: Float64Array;
  returns: Float64Array;
} {
  const { B, T } = a;
  const { returns, weight } = returnsAndPathWeights(a);
  // Compaction: row b's masked tokens' G and W at positions 0 … length − 1, zeros past its length.
  const positions = Array.from({ length: B }, (_, b) =>
    Array.from({ length: T }, (_, t) => t).filter((t) => a.responseMask[b * T + t] !== 0),
  );
  const lengths = positions.map((p) => p.length);
  const L = Math.max(0, ...lengths);
  const compactReturns = new Float64Array(B * L);
  const compactWeights = new Float64Array(B * L);
  positions.forEach((p, b) =>
    p.forEach((t, k) => {
      compactReturns[b * L + k] = returns[b * T + t];
      compactWeights[b * L + k] = weight[b * T + t];
    }),
  );
  // verl leaves empty rows out of their groups: each gets an id of its own (negative, unlike the dense ones), so it
  // is a one-member group (no baseline) and out of the others' sums and zero tails.
  const groupOf = Array.from(a.groupOf, (g, b) => (lengths[b] > 0 ? g : -1 - b));
  const tail = zeroTailStarts(a.responseMask, groupOf, B, T, a.handleZeroTail);
  const baselines = new Float64Array(B * L);
  for (const members of groups(groupOf, B)) {
    if (members.length === 1) continue;
    for (let k = 0; k < L; k++) {
      let numerator = 0,
        denominator = 0;
      for (const m of members) {
        numerator += compactReturns[m * L + k] * compactWeights[m * L + k];
        denominator += compactWeights[m * L + k];
      }
      for (const b of members) if (k < tail[b]) baselines[b * L + k] = numerator / (denominator + a.epsilon);
    }
  }
  // Scatter back to the masked positions.
  const advantages = new Float64Array(B * T);
  positions.forEach((p, b) =>
    p.forEach((t, k) => {
      advantages[b * T + t] = (compactReturns[b * L + k] - baselines[b * L + k]) * a.responseMask[b * T + t];
    }),
  );
  return { advantages, returns };
}
