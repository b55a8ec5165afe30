// verl.utils.reward_score.search_r1_like_qa_em (Search-R1's qa_em): the answer is the last <answer>…</answer> of
// the response, compared by exact match with any of the golden answers after SQuAD-style normalisation
// (lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace). A right answer scores `score`
// (a quarter of it when the response spams more than ten answer tags), a wrong one `formatScore`, none 0.
// computeScoreSubem is the substring variant (compute_score_subem): right when a normalised golden answer occurs
// inside the normalised answer, with no penalty for repeated tags.
// Python's notions of whitespace, punctuation and word characters are spelled out so that non-ASCII text
// normalises as it does in verl.

/** Python's str.isspace() characters, which str.split() and str.strip() use. */
const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const PY_SPACE_RUN = new RegExp(`[${PY_SPACE}]+`, 'u');
const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, 'gu');
/** string.punctuation */
const PUNCTUATION = new Set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~');
/** re.sub(r"\b(a|an|the)\b", …) on a str: \b between Python word characters (letters, numbers, underscore). */
const ARTICLES = /(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu;

export type GoldenAnswers = string | readonly string[];

export function normalizeAnswer(text: string): string {
  const lower = text.toLowerCase();
  const noPunctuation = Array.from(lower)
    .filter((ch) => !PUNCTUATION.has(ch))
    .join('');
  const noArticles = noPunctuation.replace(ARTICLES, ' ');
  return noArticles
    .split(PY_SPACE_RUN)
    .filter((word) => word !== '')
    .join(' ');
}

export function emCheck(prediction: string, goldenAnswers: GoldenAnswers): boolean {
  const normalized = normalizeAnswer(prediction);
  return (typeof goldenAnswers === 'string' ? [goldenAnswers] : goldenAnswers).some(
    (golden) => normalizeAnswer(golden) === normalized,
  );
}

export function subemCheck(prediction: string, goldenAnswers: GoldenAnswers): boolean {
  const normalized = normalizeAnswer(prediction);
  return (typeof goldenAnswers === 'string' ? [goldenAnswers] : goldenAnswers).some((golden) =>
    normalized.includes(normalizeAnswer(golden)),
  );
}

export function extractSolution(solution: string): string | null {
  const matches = [...solution.matchAll(/<answer>(.*?)<\/answer>/gs)];
  return matches.length === 0 ? null : matches[matches.length - 1][1].replace(PY_STRIP, '');
}

function count(text: string, tag: string): number {
  return text.split(tag).length - 1;
}

/** ground_truth is verl's {target: golden answers}. */
export function computeScore(
  solution: string,
  groundTruth: { target: GoldenAnswers },
  formatScore = 0,
  score = 1,
): number {
  const answer = extractSolution(solution);
  if (answer === null) return 0;
  if (!emCheck(answer, groundTruth.target)) return formatScore;
  return count(solution, '<answer>') > 10 || count(solution, '</answer>') > 10 ? score / 4 : score;
}

/** compute_score_subem; ground_truth is verl's {target: golden answers}. */
export function computeScoreSubem(
  solution: string,
  groundTruth: { target: GoldenAnswers },
  formatScore = 0,
  score = 1,
): number {
  const answer = extractSolution(solution);
  if (answer === null) return 0;
  return subemCheck(answer, groundTruth.target) ? score : formatScore;
}

/**
 * Search-R1's own qa_em.compute_score_em / compute_score_subem (its verl fork, which scores the prompt and the
 * response together): the answer is the last <answer>…</answer> only when there are at least two (the first is
 * the prompt's example), and repeated tags cost nothing.
 */
export function computeScoreSearchR1(
  solution: string,
  groundTruth: { target: GoldenAnswers },
  substring: boolean,
  formatScore = 0,
  score = 1,
): number {
  const matches = [...solution.matchAll(/<answer>(.*?)<\/answer>/gs)];
  if (matches.length <= 1) return 0;
  const answer = matches[matches.length - 1][1].replace(PY_STRIP, '');
  return (substring ? subemCheck : emCheck)(answer, groundTruth.target) ? score : formatScore;
}
