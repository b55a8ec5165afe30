// CPU reference (float64) for kernels/ppo/logprob-entropy: per-token log p(label) and entropy from logits
// [N, V] (verl's logprobs_from_logits / entropy_from_logits), and the backward that turns per-token
// coefficients d loss/d logprob and d loss/d entropy into d loss/d logits.

export function logprobEntropyRef(
  logits: ArrayLike<number>,
  labels: ArrayLike<number>,
  N: number,
  V: number,
): { logProb: Float64Array; entropy: Float64Array } {
  const logProb = new Float64Array(N);
  const entropy = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    let max = -Infinity;
    for (let v = 0; v < V; v++) max = Math.max(max, logits[n * V + v]);
    let sum = 0,
      weighted = 0;
    for (let v = 0; v < V; v++) {
      const e = Math.exp(logits[n * V + v] - max);
      sum += e;
      weighted += e * logits[n * V + v];
    }
    const lse = max + Math.log(sum);
    entropy[n] = lse - weighted / sum;
    logProb[n] = logits[n * V + labels[n]] - lse;
  }
  return { logProb, entropy };
}

/** d/dz_v = gLogProb·(1[v = label] − p_v) − gEntropy·p_v·(z_v − Σ p z). */
export function logprobEntropyBackwardRef(
  logits: ArrayLike<number>,
  labels: ArrayLike<number>,
  gradLogProb: ArrayLike<number>,
  gradEntropy: ArrayLike<number>,
  N: number,
  V: number,
): Float64Array {
  const out = new Float64Array(N * V);
  for (let n = 0; n < N; n++) {
    let max = -Infinity;
    for (let v = 0; v < V; v++) max = Math.max(max, logits[n * V + v]);
    let sum = 0,
      weighted = 0;
    for (let v = 0; v < V; v++) {
      const e = Math.exp(logits[n * V + v] - max);
      sum += e;
      weighted += e * logits[n * V + v];
    }
    const meanLogit = weighted / sum;
    for (let v = 0; v < V; v++) {
      const z = logits[n * V + v];
      const p = Math.exp(z - max) / sum;
      out[n * V + v] = gradLogProb[n] * ((v === labels[n] ? 1 : 0) - p) - gradEntropy[n] * p * (z - meanLogit);
    }
  }
  return out;
}
