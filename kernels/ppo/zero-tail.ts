// handle_zero_tail of verl's optimal-token-baseline estimators, decided on the host from the response mask: in a
// group whose longest response is the only one that long, its baseline is zeroed from the second-longest length on
// (the tail no other response covers), counted in columns (optimal_token_baseline) or in the slots of the compacted
// masked tokens (tir_optimal_token_baseline). Imports nothing: the launcher's caller and the reference both use it.

/** Per row, the column (or slot) from which handle_zero_tail zeroes its baseline (T: never). */
export function zeroTailStarts(
  responseMask: ArrayLike<number>,
  groupOf: ArrayLike<number>,
  B: number,
  T: number,
  handleZeroTail: boolean,
): Uint32Array {
  const starts = new Uint32Array(B).fill(T);
  if (!handleZeroTail) return starts;
  const lengths = Array.from({ length: B }, (_, b) => {
    let n = 0;
    for (let t = 0; t < T; t++) n += responseMask[b * T + t];
    return n;
  });
  const groups = new Map<number, number[]>();
  for (let b = 0; b < B; b++) groups.set(groupOf[b], [...(groups.get(groupOf[b]) ?? []), b]);
  for (const members of groups.values()) {
    if (members.length < 2) continue;
    const sorted = members.map((b) => lengths[b]).sort((x, y) => x - y);
    const max = sorted[sorted.length - 1];
    const second = sorted[sorted.length - 2];
    const longest = members.filter((b) => lengths[b] === max);
    if (longest.length === 1 && max > second) starts[longest[0]] = Math.floor(second);
  }
  return starts;
}
