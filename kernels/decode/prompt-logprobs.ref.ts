// CPU reference of kernels/decode/prompt-logprobs (float64): per position, log_softmax(logits · invTemperature) of
// the token that follows, its rank (1 + the tokens with a larger logit), the K most likely tokens (top-logprobs'
// reference) and the log-probs of the `gather` tokens.
import { topLogprobsRef } from './top-logprobs.ref.ts';

export function promptLogprobsRef(
  logits: ArrayLike<number>,
  V: number,
  targets: readonly number[],
  K: number,
  gather: readonly number[] = [],
  invTemperature = 1,
): { logprob: number; rank: number; ids: number[]; logprobs: number[]; gathered: number[] }[] {
  const rows = targets.length;
  const top = topLogprobsRef(logits, V, rows, new Array<number>(rows).fill(1 / invTemperature), Math.max(K, 1));
  return targets.map((target, r) => {
    const row = Array.from({ length: V }, (_, v) => logits[r * V + v]);
    const max = Math.max(...row);
    const logNormalizer = Math.log(row.reduce((s, x) => s + Math.exp((x - max) * invTemperature), 0));
    const logprob = (v: number) => (row[v] - max) * invTemperature - logNormalizer;
    return {
      logprob: logprob(target),
      rank: 1 + row.filter((x) => x > row[target]).length,
      ids: top[r].ids.slice(0, K),
      logprobs: top[r].logprobs.slice(0, K),
      gathered: gather.map(logprob),
    };
  });
}
