// Rule reward of the built-in arithmetic task (data_source "arithmetic"): 1 when the response, up to its first
// special token (the end token, or padding), is exactly an integer equal to the ground truth; 0 otherwise —
// no partial credit, so the reward is the task's accuracy.

/**
 * The special tokens of the built-in arithmetic vocabulary (ppo/tasks/arithmetic.ts's tokenizer): an answer ends at
 * any.
 */
export const ARITHMETIC_SPECIAL_TOKENS = ['<pad>', '<s>', '</s>', '<|user|>', '<|assistant|>'] as const;

/** The response text before the first special token (the whole text when the decoder already dropped them). */
function answerText(solution: string): string {
  let end = solution.length;
  for (const token of ARITHMETIC_SPECIAL_TOKENS) {
    const at = solution.indexOf(token);
    if (at >= 0 && at < end) end = at;
  }
  return solution.slice(0, end);
}

const INTEGER = /^-?[0-9]+$/;

export function computeScore(solution: string, groundTruth: string): number {
  if (!INTEGER.test(groundTruth))
    throw new Error(`arithmetic: ground truth must be an integer, got ${JSON.stringify(groundTruth)}`);
  const answer = answerText(solution);
  // BigInt: operands of many digits exceed 2^53, where Number would call different sums equal.
  return INTEGER.test(answer) && BigInt(answer) === BigInt(groundTruth) ? 1 : 0;
}
