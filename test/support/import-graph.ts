// The project's import statements as data, for the tests of which file may import which: folder rules
// (test/cpu/import-rules.test.ts), ppo/'s layers (ppo-import-layers.test.ts), the kernels' leaf references
// (kernel-reference-leaf.test.ts). A rule names the importing files and the imported ones by folder prefix ('tools/')
// or pattern; relative imports are resolved to repository paths, package imports ('vitest', 'node:fs') are listed
// only when asked for.
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, sep } from 'node:path';
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
  /** The imported file, relative to the repository root; a package import's specifier as written. */
  target: string;
  /** `import type` / `export type`: erased when compiled, so nothing is loaded at run time. */
  typeOnly: boolean;
}

export interface ImportOptions {
  /** Also list package imports ('vitest', 'node:fs'), whose target is their specifier. */
  packages?: boolean;
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

/** Every .ts/.js/.mjs file under `folder` (repository-relative; the whole project by default), repository-relative,
 *  skipping dot folders and generated output. */
export function sourceFiles(folder = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(REPO_ROOT, folder), { withFileTypes: true })) {
    if (entry.name.startsWith('.') || NOT_SOURCE.has(entry.name)) continue;
    const path = join(folder, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (SOURCE_FILE.test(entry.name)) out.push(path.split(sep).join('/'));
  }
  return out.sort();
}

// Static imports and re-exports start a line (`import … from '…'`, `export … from '…'`, `import '…'`), so a
// commented-out one does not count; dynamic `import('…')` counts wherever it stands.
const IMPORT =
  /^[ \t]*(?:import|export)\b(\s+type\b)?(?:[^;'"]*?\bfrom)?\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** The relative imports of one file (repository-relative path); with `packages`, its package imports too. */
export function importsOf(file: string, options: ImportOptions = {}): ImportEdge[] {
  return importsIn(file, readFileSync(join(REPO_ROOT, file), 'utf8'), options);
}

/** The relative imports in `source`, resolved as if it were `file`; with `packages`, its package imports too. */
export function importsIn(file: string, source: string, { packages = false }: ImportOptions = {}): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const m of source.matchAll(IMPORT)) {
    const specifier = m[2] ?? m[3];
    const isRelative = specifier.startsWith('.');
    if (!isRelative && !packages) continue;
    const line = source.slice(0, m.index).split('\n').length;
    const target = isRelative ? posix.join(posix.dirname(file), specifier) : specifier;
    edges.push({ file, line, specifier, target, typeOnly: m[1] !== undefined });
  }
  return edges;
}

/** One line per import that breaks a rule: `tools/x.ts:12 imports test/y.ts (why)`. */
export function importViolations(
  rules: readonly ImportRule[],
  files: readonly string[] = sourceFiles(),
  edgesOf = importsOf,
): string[] {
  const out: string[] = [];
  for (const file of files) {
    const applying = rules.filter((r) => matches(file, r.from) && !(r.exceptFrom && matches(file, r.exceptFrom)));
    if (applying.length === 0) continue;
    for (const edge of edgesOf(file)) {
      for (const rule of applying) {
        if (matches(edge.target, rule.mustNotImport))
          out.push(`${edge.file}:${edge.line} imports ${edge.target} (${rule.why})`);
      }
    }
  }
  return out;
}
