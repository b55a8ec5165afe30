// verl.utils.reward_score.math_dapo, DAPO's reward (dapo-math-17k, AIME), after Minerva's answer checking in
// lm-evaluation-harness: the answer is the last "Answer: …" line of the response's last 300 characters, normalised
// (units, \text{}, \boxed{}, \frac and \sqrt shorthand, $…$, thousands commas) and compared with the ground truth
// normalised the same way. It returns {score: 1 or -1, acc, pred}, the normalised answer as pred. With
// strict_box_verify the content of the last \boxed{…} in the last 100 characters must equal the ground truth as
// written. Python's semantics are kept where JavaScript's differ: slices count code points, `.` excludes only
// "\n", and \s and strip() use Python's whitespace.
import { throughClosingBrace } from './math.ts';

/** verl: "The longest answer in MATH-500 has 159 characters". */
const SOLUTION_CLIP_CHARS = 300;
const STRICT_BOX_CHARS = 100;
const INVALID_ANSWER = '[INVALID]';

export type MathDapoResult = { score: number; acc: boolean; pred: string | null };

/** Python's s[start:] with a negative start counting from the end, by code points (Array.from splits by code point). */
function sliceFrom(s: string, start: number): string {
  return Array.from(s).slice(start).join('');
}

/** Python's whitespace (str.isspace, and re's \s on str): JavaScript's \s and trim() leave out U+001C–U+001F and
 *  U+0085, and add U+FEFF. */
const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
export const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, 'gu');
/** Minerva's `(?i)Answer\s*:\s*([^\n]+)`; with the u flag, case-insensitive matching folds ſ to s as Python does. */
const ANSWER_PATTERN = new RegExp(`Answer[${PY_SPACE}]*:[${PY_SPACE}]*([^\\n]+)`, 'giu');

/** Python's str.isdigit(): non-empty, each character a decimal digit or one of Unicode's other digits
 *  (Numeric_Type=Digit: superscripts, circled digits, …, listed from Python 3.11's unicodedata). */
const PY_DIGITS =
  /^[\p{Nd}\u00b2\u00b3\u00b9\u1369-\u1371\u19da\u2070\u2074-\u2079\u2080-\u2089\u2460-\u2468\u2474-\u247c\u2488-\u2490\u24ea\u24f5-\u24fd\u24ff\u2776-\u277e\u2780-\u2788\u278a-\u2792\u{10a40}-\u{10a43}\u{10e60}-\u{10e68}\u{11052}-\u{1105a}\u{1f100}-\u{1f10a}]+$/u;

// ppo/rewards/math.ts has functions of these names (verl's math_reward), but they also take "\boxed x" and
// \fbox{x}; math_dapo sees only \boxed{…}, so a response boxed the other ways has no box here.
export function lastBoxedOnlyString(text: string): string | null {
  const idx = text.lastIndexOf('\\boxed{');
  if (idx < 0) return null;
  return throughClosingBrace(text, idx);
}

export function removeBoxed(boxed: string): string {
  if (!boxed.startsWith('\\boxed{') || !boxed.endsWith('}'))
    throw new Error(`math_dapo remove_boxed: ${JSON.stringify(boxed)} is not \\boxed{…}`);
  return boxed.slice('\\boxed{'.length, -1);
}

const SUBSTITUTIONS: readonly [string, string][] = [
  ['an ', ''],
  ['a ', ''],
  ['.$', '$'],
  ['\\$', ''],
  ['\\ ', ''],
  [' ', ''],
  ['mbox', 'text'],
  [',\\text{and}', ','],
  ['\\text{and}', ','],
  ['\\text{m}', '\\text{}'],
];

const REMOVED_EXPRESSIONS: readonly string[] = [
  'square',
  'ways',
  'integers',
  'dollars',
  'mph',
  'inches',
  'hours',
  'km',
  'units',
  '\\ldots',
  'sue',
  'points',
  'feet',
  'minutes',
  'digits',
  'cents',
  'degrees',
  'cm',
  'gm',
  'pounds',
  'meters',
  'meals',
  'edges',
  'students',
  'childrentickets',
  'multiples',
  '\\text{s}',
  '\\text{.}',
  '\\text{\ns}',
  '\\text{}^2',
  '\\text{}^3',
  '\\text{\n}',
  '\\text{}',
  '\\mathrm{th}',
  '^\\circ',
  '^{\\circ}',
  '\\;',
  ',\\!',
  '{,}',
  '"',
  '\\dots',
];

/** verl's normalize_final_answer, its re.sub calls as global replaces with `[^\n]` for Python's `.`. */
export function normalizeFinalAnswer(finalAnswer: string): string {
  let s = finalAnswer.split('=').pop()!;
  for (const [before, after] of SUBSTITUTIONS) s = s.replaceAll(before, after);
  for (const expr of REMOVED_EXPRESSIONS) s = s.replaceAll(expr, '');
  // Python's "$\3$": each line keeps its first $…$ span, dollars included, and drops the rest.
  s = s.replace(/[^\n]*?\$([^\n]*?)\$[^\n]*/gu, '$$$1$$');
  s = s.replace(/\\text\{([^\n]*?)\}/gu, '$1');
  s = s.replace(/\\textbf\{([^\n]*?)\}/gu, '$1');
  s = s.replace(/\\overline\{([^\n]*?)\}/gu, '$1');
  s = s.replace(/\\boxed\{([^\n]*)\}/gu, '$1');
  // \fracab → \frac{a}{b}, \sqrta → \sqrt{a}; [^{] takes a newline too, as in Python.
  s = s.replace(/frac([^{])([^\n])/gu, 'frac{$1}{$2}');
  s = s.replace(/sqrt([^{])/gu, 'sqrt{$1}');
  s = s.replaceAll('$', '');
  if (PY_DIGITS.test(s.replaceAll(',', ''))) s = s.replaceAll(',', '');
  return s.replace(PY_STRIP, '');
}

/** The normalised last "Answer:" (or [INVALID]) and whether it equals the normalised ground truth. verl's optional
 *  gt_need_extract and answer_pattern are left out: compute_score never passes them. */
export function isCorrectMinerva(solution: string, groundTruth: string): { correct: boolean; pred: string } {
  const matches = [...solution.matchAll(ANSWER_PATTERN)];
  const pred = normalizeFinalAnswer(matches.length > 0 ? matches[matches.length - 1][1] : INVALID_ANSWER);
  return { correct: pred === normalizeFinalAnswer(groundTruth), pred };
}

/** The last \boxed{…} of the last 100 characters (from 100 before the last pause token when given), unnormalised. */
export function isCorrectStrictBox(
  solution: string,
  groundTruth: string,
  pauseTokensIndex: readonly number[] | null = null,
): { correct: boolean; pred: string | null } {
  let tail: string;
  if (pauseTokensIndex !== null) {
    if (pauseTokensIndex.length !== 4)
      throw new Error(`math_dapo: pause_tokens_index must hold 4 indices, got ${JSON.stringify(pauseTokensIndex)}`);
    tail = sliceFrom(solution, pauseTokensIndex[3] - STRICT_BOX_CHARS);
  } else {
    tail = sliceFrom(solution, -STRICT_BOX_CHARS);
  }
  const boxed = lastBoxedOnlyString(tail);
  const pred = boxed !== null ? removeBoxed(boxed) : null;
  return { correct: pred === groundTruth, pred };
}

/** verl 1dda039b's verify: the strict box when asked; else the Minerva "Answer:" line, falling back to the last
 *  \boxed{…} (compared raw, as strict_box_verify does) when there is none. `boxedFallback` false is verl b178a3cd's
 *  Minerva-only form (the verl-case harness's head profile). */
export function computeScore(
  solution: string,
  groundTruth: string,
  strictBoxVerify = false,
  pauseTokensIndex: readonly number[] | null = null,
  boxedFallback = true,
): MathDapoResult {
  const clipped = sliceFrom(solution, -SOLUTION_CLIP_CHARS);
  const verify = (): { correct: boolean; pred: string | null } => {
    if (strictBoxVerify) return isCorrectStrictBox(clipped, groundTruth, pauseTokensIndex);
    const minerva = isCorrectMinerva(clipped, groundTruth);
    if (minerva.pred !== INVALID_ANSWER || !boxedFallback) return minerva;
    const box = isCorrectStrictBox(clipped, groundTruth, pauseTokensIndex);
    return box.pred !== null ? box : minerva;
  };
  const { correct, pred } = verify();
  return { score: correct ? 1 : -1, acc: correct, pred };
}
