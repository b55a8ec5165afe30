// The CPU references are a leaf (kernels/README.md, "Import rules"): every kernels/<family>/<op>.ref.ts imports only
// other references and modules that import nothing themselves, apart from `import type` (erased when compiled); and
// production code (engine/, models/ but its whole-model reference models/ref/, ppo/) never imports a reference.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SOURCE = /\.(ts|js|mjs)$/;

// Modules a reference may use at run time besides other references; each must import nothing (checked below).
// engine/half-float.ts is the host conversion uploads use, which to-half's reference is by design; zero-tail.ts and
// covariance-selection.ts are host-side decisions the kernels take as input, so their references take them too.
const LEAVES = ['kernels/ppo/ppo-vocabulary.ts', 'engine/half-float.ts', 'kernels/ppo/zero-tail.ts', 'kernels/ppo/covariance-selection.ts'];

interface ModuleImport { specifier: string; typeOnly: boolean; line: number }

function importsOf(path: string): ModuleImport[] {
  const text = readFileSync(join(ROOT, path), 'utf8');
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: ModuleImport[] = [];
  const add = (node: ts.Node, specifier: ts.Expression | undefined, typeOnly: boolean) => {
    if (specifier && ts.isStringLiteralLike(specifier)) {
      found.push({ specifier: specifier.text, typeOnly, line: file.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
    }
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node, node.moduleSpecifier, node.importClause?.isTypeOnly ?? false);
    else if (ts.isExportDeclaration(node)) add(node, node.moduleSpecifier, node.isTypeOnly);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node, node.arguments[0], false);
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** The repository path an import names, or the bare specifier (a package, node:...). */
function target(from: string, specifier: string): string {
  return specifier.startsWith('.') ? relative(ROOT, resolve(ROOT, dirname(from), specifier)).split('\\').join('/') : specifier;
}

function sourcesUnder(dir: string): string[] {
  return (readdirSync(join(ROOT, dir), { recursive: true }) as string[])
    .map((p) => `${dir}/${p.split('\\').join('/')}`).filter((p) => SOURCE.test(p)).sort();
}

const isReference = (path: string) => path.startsWith('kernels/') && path.endsWith('.ref.ts');

/** `path:line imports specifier` for each run-time import of a reference outside the leaf. */
function referenceLeafViolations(references: string[]): string[] {
  return references.flatMap((path) => importsOf(path).filter((i) => !i.typeOnly)
    .filter((i) => { const to = target(path, i.specifier); return !isReference(to) && !LEAVES.includes(to); })
    .map((i) => `${path}:${i.line} imports ${i.specifier}`));
}

/** `path:line imports specifier` for each import of a reference (type-only included) by production code. */
function productionReferenceImports(files: string[]): string[] {
  return files.flatMap((path) => importsOf(path)
    .filter((i) => { const to = target(path, i.specifier); return isReference(to) || to.startsWith('kernels/ref/'); })
    .map((i) => `${path}:${i.line} imports ${i.specifier}`));
}

describe('the CPU references are a leaf', () => {
  const references = sourcesUnder('kernels').filter(isReference);

  it('finds the references next to their ops', () => {
    expect(references.length).toBeGreaterThan(20);
    expect(references).toContain('kernels/ppo/gae.ref.ts');
  });

  it('a reference imports only references, the leaf modules, and types', () => {
    expect(referenceLeafViolations(references)).toEqual([]);
  });

  it('the leaf modules import nothing', () => {
    expect(LEAVES.flatMap((path) => importsOf(path).map((i) => `${path}:${i.line} imports ${i.specifier}`))).toEqual([]);
  });

  it('production code (engine/, models/ but models/ref/, ppo/) imports no reference', () => {
    const production = [...sourcesUnder('engine'), ...sourcesUnder('models'), ...sourcesUnder('ppo')]
      .filter((p) => !p.startsWith('models/ref/'));
    expect(production.length).toBeGreaterThan(50);
    expect(productionReferenceImports(production)).toEqual([]);
  });
});
