// The project's import statements as data, for tests of which folder may import which (test/cpu/import-rules.test.ts).
// A rule names the importing files and the imported ones by folder prefix ('tools/') or pattern; relative imports
// are resolved to repository paths, package imports ('vitest', 'node:fs') are not checked.
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Generated or downloaded folders, as .gitignore lists them: never project source. */
const NOT_SOURCE = new Set(['node_modules', 'runs', 'outputs', 'checkpoints', 'dist', 'test-artifacts']);
const SOURCE_FILE = /\.(ts|js|mjs)$/;

export interface ImportEdge {
  /** Importing file, relative to the repository root with '/' separators. */
  file: string;
  line: number;
  specifier: string;
  /** The imported file, relative to the repository root. */
  target: string;
}

/** A folder prefix ending in '/' ('tools/'), or a pattern tested against the repository path. */
export type PathMatcher = string | RegExp;

export interface ImportRule {
  from: PathMatcher;
  /** Importing files the rule leaves out (e.g. a folder's own files). */
  exceptFrom?: PathMatcher;
  mustNotImport: PathMatcher;
  why: string;
}

function matches(path: string, matcher: PathMatcher): boolean {
  return typeof matcher === 'string' ? path.startsWith(matcher) : matcher.test(path);
}

/** Every .ts/.js/.mjs file of the project, repository-relative, skipping dot folders and generated output. */
export function sourceFiles(dir = REPO_ROOT): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || NOT_SOURCE.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (SOURCE_FILE.test(entry.name)) out.push(relative(REPO_ROOT, path).split(sep).join('/'));
  }
  return out.sort();
}

// Static imports and re-exports start a line (`import … from '…'`, `export … from '…'`, `import '…'`), so a
// commented-out one does not count; dynamic `import('…')` counts wherever it stands.
const IMPORT = /^[ \t]*(?:import|export)\b(?:[^;'"]*?\bfrom)?\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** The relative imports of one file (repository-relative path). */
export function importsOf(file: string): ImportEdge[] {
  return importsIn(file, readFileSync(join(REPO_ROOT, file), 'utf8'));
}

/** The relative imports in `source`, resolved as if it were `file`. */
export function importsIn(file: string, source: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const m of source.matchAll(IMPORT)) {
    const specifier = m[1] ?? m[2];
    if (!specifier.startsWith('.')) continue;
    const line = source.slice(0, m.index).split('\n').length;
    edges.push({ file, line, specifier, target: posix.join(posix.dirname(file), specifier) });
  }
  return edges;
}

/** One line per import that breaks a rule: `tools/x.ts:12 imports test/y.ts (why)`. */
export function importViolations(rules: readonly ImportRule[], files: readonly string[] = sourceFiles(), edgesOf = importsOf): string[] {
  const out: string[] = [];
  for (const file of files) {
    const applying = rules.filter((r) => matches(file, r.from) && !(r.exceptFrom && matches(file, r.exceptFrom)));
    if (applying.length === 0) continue;
    for (const edge of edgesOf(file)) {
      for (const rule of applying) {
        if (matches(edge.target, rule.mustNotImport)) out.push(`${edge.file}:${edge.line} imports ${edge.target} (${rule.why})`);
      }
    }
  }
  return out;
}
