// CPU reference (float64) for kernels/ppo/pairwise-loss: the Bradley–Terry loss of P preference pairs,
// loss = mean_p −log σ(r_chosen[p] − r_rejected[p] − margin[p]), its gradient and TRL's RewardTrainer metrics.
// values: (2P, T), P chosen rows then their P rejected rows; last: (2P) each row's last non-pad position.

export interface PairwiseLossResult {
  loss: number;
  /** Fraction of pairs with r_chosen > r_rejected. */
  accuracy: number;
  /** mean r_chosen − r_rejected. */
  margin: number;
  /** d loss / d values, (2P, T). */
  dValues: Float64Array;
}

export function pairwiseLossRef(a: {
  values: ArrayLike<number>;
  last: ArrayLike<number>;
  margin: ArrayLike<number>;
  P: number;
  T: number;
}): PairwiseLossResult {
  const { values, last, margin, P, T } = a;
  const dValues = new Float64Array(2 * P * T);
  let loss = 0;
  let correct = 0;
  let difference = 0;
  for (let p = 0; p < P; p++) {
    const chosenAt = p * T + last[p];
    const rejectedAt = (P + p) * T + last[P + p];
    const raw = values[chosenAt] - values[rejectedAt];
    const d = raw - margin[p];
    // −log σ(d) = log(1 + e^−d); d/dd = −σ(−d).
    loss += Math.max(-d, 0) + Math.log1p(Math.exp(-Math.abs(d)));
    const sigmoidOfNegative = 1 / (1 + Math.exp(d));
    dValues[chosenAt] = -sigmoidOfNegative / P;
    dValues[rejectedAt] = sigmoidOfNegative / P;
    if (raw > 0) correct++;
    difference += raw;
  }
  return { loss: loss / P, accuracy: correct / P, margin: difference / P, dValues };
}
