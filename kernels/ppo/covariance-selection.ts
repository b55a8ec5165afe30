// The token selection of verl's clip_cov and kl_cov policy losses (core_algos.compute_policy_loss_{clip,kl}_cov),
// made on the host: both rank tokens by the covariance (A − mean A)·(log π − mean log π) over the whole
// (micro-)batch, a batch-level top-k/random pick that a per-row kernel cannot make. The policy-loss kernel and its
// reference read the result as a 0/1 flag per token. Imports nothing, so the reference may use it too.
//   clip_cov: among valid tokens the PPO clip did not already clip, with lb < cov < ub, pick
//             max(⌊clip_cov_ratio·Σmask⌋, 1) at random (verl: torch.randperm); their loss is cut to 0.
//   kl_cov:   the max(⌊kl_cov_ratio·#valid⌋, 1) valid tokens with the largest covariance (plain means over
//             valid tokens) get + ppo_kl_coef·|log-ratio|.

export interface CovarianceSelectionArgs {
  oldLogProb: ArrayLike<number>;
  logProb: ArrayLike<number>;
  advantages: ArrayLike<number>;
  responseMask: ArrayLike<number>;
  clipRatioLow: number;
  clipRatioHigh: number;
  clipCovRatio: number;
  clipCovLb: number;
  clipCovUb: number;
  klCovRatio: number;
}

/**
 * A random permutation of 0 … n−1 (clip_cov cuts the candidates at its first clip_num positions, as verl's
 * torch.randperm).
 */
export type Permutation = (n: number) => ArrayLike<number>;

/** Fisher–Yates from the last index down, one draw of random() ∈ [0, 1) per index. */
export function shuffledIndices(random: () => number): Permutation {
  return (n) => {
    const order = Array.from({ length: n }, (_, i) => i);
    for (let j = n - 1; j > 0; j--) {
      const k = Math.floor(random() * (j + 1));
      [order[j], order[k]] = [order[k], order[j]];
    }
    return order;
  };
}

/** 0/1 per token: the tokens clip_cov cuts (mode 'clip_cov') or kl_cov penalises (mode 'kl_cov'). */
export function selectCovarianceTokens(
  mode: 'clip_cov' | 'kl_cov',
  a: CovarianceSelectionArgs,
  permutation: Permutation,
): Float32Array {
  const n = a.responseMask.length;
  const selected = new Float32Array(n);
  const valid: number[] = [];
  for (let i = 0; i < n; i++) if (a.responseMask[i] > 0) valid.push(i);
  if (mode === 'kl_cov') {
    if (valid.length === 0) return selected;
    const meanAdv = valid.reduce((s, i) => s + a.advantages[i], 0) / valid.length;
    const meanLogProb = valid.reduce((s, i) => s + a.logProb[i], 0) / valid.length;
    const cov = valid.map((i) => (a.advantages[i] - meanAdv) * (a.logProb[i] - meanLogProb));
    const k = Math.max(1, Math.floor(valid.length * a.klCovRatio));
    const order = valid.map((_, j) => j).sort((x, y) => cov[y] - cov[x] || x - y);
    for (const j of order.slice(0, k)) selected[valid[j]] = 1;
    return selected;
  }
  // verl's masked_mean: Σ x·mask / (Σ mask + 1e-8).
  let maskSum = 0,
    advSum = 0,
    logProbSum = 0;
  for (let i = 0; i < n; i++) {
    maskSum += a.responseMask[i];
    advSum += a.advantages[i] * a.responseMask[i];
    logProbSum += a.logProb[i] * a.responseMask[i];
  }
  const meanAdv = advSum / (maskSum + 1e-8);
  const meanLogProb = logProbSum / (maskSum + 1e-8);
  const candidates = valid.filter((i) => {
    const ratio = Math.exp(a.logProb[i] - a.oldLogProb[i]);
    const clipped = Math.min(Math.max(ratio, 1 - a.clipRatioLow), 1 + a.clipRatioHigh);
    if (-a.advantages[i] * clipped > -a.advantages[i] * ratio) return false;
    const cov = (a.advantages[i] - meanAdv) * (a.logProb[i] - meanLogProb);
    return cov > a.clipCovLb && cov < a.clipCovUb;
  });
  const clipNum = Math.max(Math.floor(a.clipCovRatio * maskSum), 1);
  // Candidates in row-major order (torch.nonzero's), cut at the permutation's first clipNum positions; all of them
  // when there are no more than clipNum (then no draw matters).
  const order = permutation(candidates.length);
  for (let j = 0; j < Math.min(clipNum, candidates.length); j++) selected[candidates[order[j]]] = 1;
  return selected;
}
