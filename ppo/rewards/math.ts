// verl.utils.reward_score.math (Hendrycks MATH, after lm-evaluation-harness): the answer is the content of the
// last \boxed{…} (or "\boxed …") in the response, compared with the ground truth after the same string
// normalisation (fractions, sqrt, units, spaces, "x = " prefixes). Python's failure paths are kept: an
// exception inside the normalisation falls back to comparing the raw strings, and a malformed box scores 0.

/** Python's s[0] / s[1:]: first code point and the rest; throws on an empty string like an IndexError. */
function head(s: string): [string, string] {
  const first = s.codePointAt(0);
  if (first === undefined) throw new RangeError('string index out of range');
  const char = String.fromCodePoint(first);
  return [char, s.slice(char.length)];
}

/** text[start…] up to the brace that closes the first one opened from `start` on, or null if it never closes
 *  (verl's brace count in both last_boxed_only_string versions, math_reward's and math_dapo's). */
export function throughClosingBrace(text: string, start: number): string | null {
  let open = 0;
  for (let i = start; i < text.length; i++) {
    if (text[i] === '{') open++;
    if (text[i] === '}') {
      open--;
      if (open === 0) return text.slice(start, i + 1);
    }
  }
  return null;
}

export function lastBoxedOnlyString(text: string): string | null {
  if (text.includes('\\boxed ')) return `\\boxed ${text.split('\\boxed ').pop()!.split('$')[0]}`;
  let idx = text.lastIndexOf('\\boxed');
  if (idx < 0) {
    idx = text.lastIndexOf('\\fbox');
    if (idx < 0) return null;
  }
  return throughClosingBrace(text, idx);
}

export function removeBoxed(boxed: string): string {
  if (boxed.includes('\\boxed ')) {
    if (!boxed.startsWith('\\boxed '))
      throw new Error(`remove_boxed: ${JSON.stringify(boxed)} does not start with "\\boxed "`);
    return boxed.slice('\\boxed '.length);
  }
  if (!boxed.startsWith('\\boxed{') || !boxed.endsWith('}'))
    throw new Error(`remove_boxed: ${JSON.stringify(boxed)} is not \\boxed{…}`);
  return boxed.slice('\\boxed{'.length, -1);
}

/** \frac1b → \frac{1}{b}, \frac12 → \frac{1}{2}, \frac1{72} → \frac{1}{72}. */
function fixFracs(text: string): string {
  const [first, ...rest] = text.split('\\frac');
  let out = first;
  for (const part of rest) {
    out += '\\frac';
    const [a, afterA] = head(part);
    if (a === '{') {
      out += part;
      continue;
    }
    if (afterA === '') return text;
    const [b, afterB] = head(afterA);
    out += b !== '{' ? `{${a}}{${b}}${afterB}` : `{${a}}${b}${afterB}`;
  }
  return out;
}

/** "3/4" → \frac{3}{4}, only when both sides are integers written the way Python's str(int) writes them. */
function fixASlashB(text: string): string {
  const parts = text.split('/');
  const canonicalInt = /^(0|-?[1-9][0-9]*)$/;
  if (parts.length !== 2 || !canonicalInt.test(parts[0]) || !canonicalInt.test(parts[1])) return text;
  return `\\frac{${parts[0]}}{${parts[1]}}`;
}

/** "\text{ " only ever starts a unit on the right. */
function removeRightUnits(text: string): string {
  if (!text.includes('\\text{ ')) return text;
  const splits = text.split('\\text{ ');
  if (splits.length !== 2) throw new Error('remove_right_units: more than one "\\text{ "');
  return splits[0];
}

/** \sqrt3 → \sqrt{3}. */
function fixSqrt(text: string): string {
  if (!text.includes('\\sqrt')) return text;
  const [first, ...rest] = text.split('\\sqrt');
  let out = first;
  for (const part of rest) {
    const [a, afterA] = head(part);
    out += a !== '{' ? `\\sqrt{${a}}${afterA}` : `\\sqrt${part}`;
  }
  return out;
}

export function stripString(input: string): string {
  let s = input.replaceAll('\n', '').replaceAll('\\!', '').replaceAll('\\\\', '\\');
  s = s.replaceAll('tfrac', 'frac').replaceAll('dfrac', 'frac');
  s = s.replaceAll('\\left', '').replaceAll('\\right', '');
  s = s.replaceAll('^{\\circ}', '').replaceAll('^\\circ', '');
  s = s.replaceAll('\\$', '');
  s = removeRightUnits(s);
  // verl removes \\% (two backslashes) before \%: halving each \\ above still leaves one from \\\% (three).
  s = s.replaceAll('\\\\%', '').replaceAll('\\%', '');
  s = s.replaceAll(' .', ' 0.').replaceAll('{.', '{0.');
  if (s.length === 0) return s;
  if (s[0] === '.') s = `0${s}`;
  const sides = s.split('=');
  if (sides.length === 2 && Array.from(sides[0]).length <= 2) s = sides[1];
  s = fixSqrt(s);
  s = s.replaceAll(' ', '');
  s = fixFracs(s);
  if (s === '0.5') s = '\\frac{1}{2}';
  return fixASlashB(s);
}

export function isEquiv(a: string | null, b: string | null): boolean {
  if (a === null || b === null) return a === b;
  try {
    return stripString(a) === stripString(b);
  } catch {
    return a === b;
  }
}

export function computeScore(solution: string, groundTruth: string): number {
  try {
    const boxed = lastBoxedOnlyString(solution);
    return boxed !== null && isEquiv(removeBoxed(boxed), groundTruth) ? 1 : 0;
  } catch {
    return 0;
  }
}
