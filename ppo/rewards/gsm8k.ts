// verl.utils.reward_score.gsm8k: rule reward for GSM8K. Only the last 300 characters are searched (verl's
// _SOLUTION_CLIP_CHARS). strict: the last "#### <number>" (commas and $ stripped); flexible: the last number-like
// token that is not "" or ".". No answer scores 0, a wrong answer format_score, the right one `score`.

const SOLUTION_CLIP_CHARS = 300;

export type Gsm8kMethod = 'strict' | 'flexible';

export function extractSolution(solution: string, method: Gsm8kMethod = 'strict'): string | null {
  if (method !== 'strict' && method !== 'flexible')
    throw new Error(`gsm8k: method must be strict or flexible, got ${method}`);
  // Python slices by code point; Array.from splits by code point too (string.slice would split surrogate pairs).
  const chars = Array.from(solution);
  const text = chars.length > SOLUTION_CLIP_CHARS ? chars.slice(-SOLUTION_CLIP_CHARS).join('') : solution;
  if (method === 'strict') {
    const matches = [...text.matchAll(/#### (-?[0-9.,]+)/g)];
    return matches.length === 0 ? null : matches[matches.length - 1][1].replaceAll(',', '').replaceAll('$', '');
  }
  const numbers = [...text.matchAll(/(-?[0-9.,]+)/g)].map((m) => m[1]);
  if (numbers.length === 0) return null;
  let answer = numbers[numbers.length - 1];
  for (let i = numbers.length - 1; i >= 0; i--) {
    answer = numbers[i];
    if (answer !== '' && answer !== '.') break;
  }
  return answer;
}

export function computeScore(
  solution: string,
  groundTruth: string,
  method: Gsm8kMethod = 'strict',
  formatScore = 0,
  score = 1,
): number {
  const answer = extractSolution(solution, method);
  if (answer === null) return 0;
  return answer === groundTruth ? score : formatScore;
}
