// CPU reference of the fused LM head (float64): logits z = hidden·Wᵀ / temperature, per-row log-softmax
// statistics (with Σπ²), and the gradient of Σ dLogprobs·logprobs + Σ dEntropy·entropy.
// hidden: (N, C), weight: (V, C), targets: (N), per-row outputs: (N).

export interface LmHeadRefArgs {
  hidden: ArrayLike<number>;
  weight: ArrayLike<number>;
  targets: ArrayLike<number>;
  N: number;
  C: number;
  V: number;
  temperature: number;
}

/** z: (N, V) logits divided by the temperature. */
function scaledLogits(a: LmHeadRefArgs): Float64Array {
  const { hidden, weight, N, C, V, temperature } = a;
  const z = new Float64Array(N * V);
  for (let n = 0; n < N; n++) {
    for (let v = 0; v < V; v++) {
      let dot = 0;
      for (let c = 0; c < C; c++) dot += hidden[n * C + c] * weight[v * C + c];
      z[n * V + v] = dot / temperature;
    }
  }
  return z;
}

/** Per row: log-prob of the target, entropy, log-sum-exp, and Σ_v π_v² summed directly (the kernel's route,
 *  exp(lse(2z) − 2·lse(z)), is verl's; this checks it by the definition). */
export function lmHeadForwardRef(a: LmHeadRefArgs): {
  logprobs: Float64Array;
  entropy: Float64Array;
  lse: Float64Array;
  sumPiSquared: Float64Array;
} {
  const { targets, N, V } = a;
  const z = scaledLogits(a);
  const logprobs = new Float64Array(N);
  const entropy = new Float64Array(N);
  const lse = new Float64Array(N);
  const sumPiSquared = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    const row = z.subarray(n * V, (n + 1) * V);
    const max = row.reduce((m, x) => Math.max(m, x), -Infinity);
    let sum = 0;
    for (const x of row) sum += Math.exp(x - max);
    lse[n] = max + Math.log(sum);
    let expectedZ = 0;
    for (const x of row) {
      const p = Math.exp(x - lse[n]);
      expectedZ += p * x;
      sumPiSquared[n] += p * p;
    }
    logprobs[n] = row[targets[n]] - lse[n];
    entropy[n] = lse[n] - expectedZ;
  }
  return { logprobs, entropy, lse, sumPiSquared };
}

/** Gradients of Σ dLogprobs·logprobs + Σ dEntropy·entropy (dEntropy null: no entropy term). */
export function lmHeadBackwardRef(
  a: LmHeadRefArgs & { dLogprobs: ArrayLike<number>; dEntropy: ArrayLike<number> | null },
): { dHidden: Float64Array; dWeight: Float64Array } {
  const { hidden, weight, targets, N, C, V, temperature, dLogprobs, dEntropy } = a;
  const z = scaledLogits(a);
  const { lse, entropy } = lmHeadForwardRef(a);
  const dLogits = new Float64Array(N * V);
  for (let n = 0; n < N; n++) {
    // Σ p·z = lse − H; dH/dz_k = −p_k (z_k − Σ p·z).
    const expectedZ = lse[n] - entropy[n];
    for (let v = 0; v < V; v++) {
      const zk = z[n * V + v];
      const p = Math.exp(zk - lse[n]);
      let dz = dLogprobs[n] * ((v === targets[n] ? 1 : 0) - p);
      if (dEntropy) dz -= dEntropy[n] * p * (zk - expectedZ);
      dLogits[n * V + v] = dz / temperature;
    }
  }
  const dHidden = new Float64Array(N * C);
  const dWeight = new Float64Array(V * C);
  for (let n = 0; n < N; n++) {
    for (let v = 0; v < V; v++) {
      const g = dLogits[n * V + v];
      for (let c = 0; c < C; c++) {
        dHidden[n * C + c] += g * weight[v * C + c];
        dWeight[v * C + c] += g * hidden[n * C + c];
      }
    }
  }
  return { dHidden, dWeight };
}
