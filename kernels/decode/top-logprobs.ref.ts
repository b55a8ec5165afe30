// CPU reference of kernels/decode/top-logprobs (float64): sort each row's logits (value descending, index ascending)
// and take the first K, with log_softmax(logits / temperature) (temperature 1 when greedy).

/** Per row, its K (token, log-prob) pairs, most likely first. */
export function topLogprobsRef(
  logits: ArrayLike<number>,
  V: number,
  rows: number,
  temperatures: readonly number[],
  K: number,
): { ids: number[]; logprobs: number[] }[] {
  return Array.from({ length: rows }, (_, r) => {
    const row = Array.from({ length: V }, (_, v) => logits[r * V + v]);
    const inv = temperatures[r] > 0 ? 1 / temperatures[r] : 1;
    const max = Math.max(...row);
    const logNormalizer = Math.log(row.reduce((s, x) => s + Math.exp((x - max) * inv), 0));
    const order = row.map((_, v) => v).sort((a, b) => row[b] - row[a] || a - b);
    const ids = order.slice(0, K);
    return { ids, logprobs: ids.map((v) => (row[v] - max) * inv - logNormalizer) };
  });
}
