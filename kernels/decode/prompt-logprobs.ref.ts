// CPU reference of kernels/decode/prompt-logprobs (float64): per position, log_softmax(logits) of the token that
// follows, its rank (1 + the tokens with a larger logit) and the K most likely tokens (top-logprobs' reference at
// temperature 1).
import { topLogprobsRef } from './top-logprobs.ref.ts';

export function promptLogprobsRef(
  logits: ArrayLike<number>,
  V: number,
  targets: readonly number[],
  K: number,
): { logprob: number; rank: number; ids: number[]; logprobs: number[] }[] {
  const rows = targets.length;
  const top = topLogprobsRef(logits, V, rows, new Array<number>(rows).fill(1), Math.max(K, 1));
  return targets.map((target, r) => {
    const row = Array.from({ length: V }, (_, v) => logits[r * V + v]);
    const max = Math.max(...row);
    const logNormalizer = Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
    return {
      logprob: row[target] - max - logNormalizer,
      rank: 1 + row.filter((x) => x > row[target]).length,
      ids: top[r].ids.slice(0, K),
      logprobs: top[r].logprobs.slice(0, K),
    };
  });
}
