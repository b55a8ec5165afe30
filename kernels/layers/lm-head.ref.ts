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

/** z: (N, V) logits divided by the temperature, of `rows` (every row when absent; the others stay 0). */
function scaledLogits(a: LmHeadRefArgs, rows: readonly number[]): Float64Array {
  const { N, V } = a;
  const z = new Float64Array(N * V);
  for (const n of rows) logitsRow(a, n, z.subarray(n * V, (n + 1) * V));
  return z;
}

function logitsRow(a: LmHeadRefArgs, n: number, into: Float64Array): void {
  const { hidden, weight, C, V, temperature } = a;
  for (let v = 0; v < V; v++) {
    let dot = 0;
    for (let c = 0; c < C; c++) dot += hidden[n * C + c] * weight[v * C + c];
    into[v] = dot / temperature;
  }
}

const allRows = (N: number) => Array.from({ length: N }, (_, n) => n);

/** Per row: log-prob of the target, entropy, log-sum-exp, and Σ_v π_v² summed directly (the kernel's route,
 *  exp(lse(2z) − 2·lse(z)), is verl's; this checks it by the definition). */
export function lmHeadForwardRef(
  a: LmHeadRefArgs,
  rows: readonly number[] = allRows(a.N),
): {
  logprobs: Float64Array;
  entropy: Float64Array;
  lse: Float64Array;
  sumPiSquared: Float64Array;
} {
  const { targets, N, V } = a;
  const z = scaledLogits(a, rows);
  const logprobs = new Float64Array(N);
  const entropy = new Float64Array(N);
  const lse = new Float64Array(N);
  const sumPiSquared = new Float64Array(N);
  for (const n of rows) {
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

type LmHeadBackwardArgs = LmHeadRefArgs & { dLogprobs: ArrayLike<number>; dEntropy: ArrayLike<number> | null };

/** Gradients of Σ dLogprobs·logprobs + Σ dEntropy·entropy (dEntropy null: no entropy term). */
export function lmHeadBackwardRef(a: LmHeadBackwardArgs): { dHidden: Float64Array; dWeight: Float64Array } {
  const { hidden, weight, N, C, V } = a;
  const z = scaledLogits(a, allRows(N));
  const { lse, entropy } = lmHeadForwardRef(a);
  const dLogits = new Float64Array(N * V);
  for (let n = 0; n < N; n++)
    for (let v = 0; v < V; v++) dLogits[n * V + v] = dLogit(a, lse, entropy, n, v, z[n * V + v]);
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

/** ∂/∂z of row n's dLogprobs·logprob + dEntropy·entropy at vocabulary entry v (zv: its scaled logit). */
function dLogit(
  a: LmHeadBackwardArgs,
  lse: ArrayLike<number>,
  entropy: ArrayLike<number>,
  n: number,
  v: number,
  zv: number,
): number {
  // Σ p·z = lse − H; dH/dz_k = −p_k (z_k − Σ p·z).
  const p = Math.exp(zv - lse[n]);
  let dz = a.dLogprobs[n] * ((v === a.targets[n] ? 1 : 0) - p);
  if (a.dEntropy) dz -= a.dEntropy[n] * p * (zv - (lse[n] - entropy[n]));
  return dz / a.temperature;
}

/**
 * dHidden of `rows` (O(V·C) each) and dWeight of `vocabRows` (O(N·C) each) from what the backward kernel takes: the
 * forward's lse and entropy are inputs, as the kernel reads them, not recomputed (a dWeight row needs every row's,
 * which would cost the whole forward; the forward's outputs have their own check). Each returned row is C values.
 */
export function lmHeadBackwardAtRef(
  a: LmHeadBackwardArgs & { lse: ArrayLike<number>; entropy: ArrayLike<number> },
  at: { rows: readonly number[]; vocabRows: readonly number[] },
): { dHidden: Float64Array[]; dWeight: Float64Array[] } {
  const { hidden, weight, N, C, V, temperature, lse, entropy } = a;
  const z = new Float64Array(V);
  const dHidden = at.rows.map((n) => {
    logitsRow(a, n, z);
    const row = new Float64Array(C);
    for (let v = 0; v < V; v++) {
      const g = dLogit(a, lse, entropy, n, v, z[v]);
      for (let c = 0; c < C; c++) row[c] += g * weight[v * C + c];
    }
    return row;
  });
  const dWeight = at.vocabRows.map((v) => {
    const row = new Float64Array(C);
    for (let n = 0; n < N; n++) {
      let dot = 0;
      for (let c = 0; c < C; c++) dot += hidden[n * C + c] * weight[v * C + c];
      const g = dLogit(a, lse, entropy, n, v, dot / temperature);
      for (let c = 0; c < C; c++) row[c] += g * hidden[n * C + c];
    }
    return row;
  });
  return { dHidden, dWeight };
}
