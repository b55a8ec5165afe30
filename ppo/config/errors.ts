// Configuration errors: every problem found, one line each, reported together; values shown as the user wrote
// them; a suggestion only when it is close (edit distance on the last segment), never a random key.

export class ConfigError extends Error {
  override name = 'ConfigError';

  constructor(readonly problems: string[]) {
    super(
      problems.length === 1
        ? problems[0]
        : `${problems.length} problems in the configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
}

export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(show).join(', ')}]`;
  if (value !== null && typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/**
 * trainer.default_local_dir given empty, in the PPO, SFT and reward-model jobs alike: it would resolve to the
 * current directory, and checkpoints and metrics would land among the user's files.
 */
export function emptyRunDirectoryProblem(dir: string): string | null {
  return dir.trim() === ''
    ? 'trainer.default_local_dir is empty: the run would write its checkpoints and metrics into the current ' +
        'directory — give it a directory of its own (default: ' +
        'checkpoints/${trainer.project_name}/${trainer.experiment_name})'
    : null;
}

/** AdamW's optim.betas of any job: two numbers in [0, 1) (a missing beta2 would reach the kernel undefined). */
export function betasProblem(key: string, betas: unknown): string | null {
  return Array.isArray(betas) && betas.length === 2 && betas.every((b) => typeof b === 'number' && b >= 0 && b < 1)
    ? null
    : `${key} must be two numbers in [0, 1) (beta1, beta2), got ${show(betas)}`;
}

/**
 * Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of neighbours (grop → grpo) cost 1.
 */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * A typo of the candidate (edits up to a third of its length, at least one) or a shortening of it (project →
 * project_name).
 */
function closeEnough(word: string, candidate: string): boolean {
  return (
    editDistance(word, candidate) <= Math.max(1, Math.floor(word.length / 3)) ||
    (word.length >= 4 && candidate.startsWith(word))
  );
}

/** The candidates nearest to `word` among those close enough to be a typo of it (none when nothing is close). */
export function closeMatches(word: string, candidates: Iterable<string>): string[] {
  let best: string[] = [];
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    if (!closeEnough(word, candidate)) continue;
    const d = editDistance(word, candidate);
    if (d < bestDistance) [best, bestDistance] = [[candidate], d];
    else if (d === bestDistance) best.push(candidate);
  }
  return best;
}

const lastSegment = (path: string) => path.slice(path.lastIndexOf('.') + 1);
const parentOf = (path: string) => path.slice(0, Math.max(0, path.lastIndexOf('.')));

/**
 * The keys a user most likely meant by an unknown dotted path: those whose last segment is close to its last
 * segment, in the same group when there are such, else anywhere (a right name in the wrong group).
 */
export function suggestKeys(path: string, knownKeys: Iterable<string>): string[] {
  const known = [...knownKeys];
  const leaf = lastSegment(path);
  const byLeaf = new Map<string, string[]>();
  for (const key of known) {
    const list = byLeaf.get(lastSegment(key)) ?? [];
    list.push(key);
    byLeaf.set(lastSegment(key), list);
  }
  const candidates = closeMatches(leaf, byLeaf.keys()).flatMap((l) => byLeaf.get(l)!);
  const sameGroup = candidates.filter((key) => parentOf(key) === parentOf(path));
  if (sameGroup.length > 0) return sameGroup.slice(0, 3);
  // Another group only where the rest of the path is right too (trainer.ppo_epochs → …actor.ppo_epochs, actor.lr
  // → …actor.optim.lr): a generic name in an unknown group (transfer_queue.enable) has no likely meaning here.
  const groups = new Set(known.flatMap((key) => key.split('.').slice(0, -1)));
  const partsKnown = path
    .split('.')
    .slice(0, -1)
    .every((part) => groups.has(part));
  return partsKnown ? candidates.slice(0, 3) : [];
}
