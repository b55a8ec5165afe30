// The CPU references are a leaf (kernels/README.md, "Import rules"): every kernels/<family>/<op>.ref.ts imports only
// other references and modules that import nothing themselves, apart from `import type` (erased when compiled); and
// production code (engine/, models/ but its whole-model reference models/ref/, ppo/) never imports a reference.
import { describe, expect, it } from 'vitest';
import { importsOf as importEdges, sourceFiles } from '../support/import-graph.ts';

// Modules a reference may use at run time besides other references; each imports nothing but another of them
// (checked below).
// engine/half-float.ts is the host conversion uploads use, which to-half's reference is by design; zero-tail.ts and
// covariance-selection.ts are host-side decisions the kernels take as input, so their references take them too;
// dynamic-map.ts is bitsandbytes' 8-bit code and block size, the format adamw8bit and its reference share (and
// engine/nf4.ts's double-quantized scales).
const LEAVES = [
  'kernels/ppo/ppo-vocabulary.ts',
  'kernels/ppo/policy-loss-modes.ts',
  'engine/half-float.ts',
  'kernels/ppo/zero-tail.ts',
  'kernels/ppo/covariance-selection.ts',
  'engine/dynamic-map.ts',
];

/** Every import of `path`, package imports included (a leaf module imports nothing at all). */
const importsOf = (path: string) => importEdges(path, { packages: true });

const isReference = (path: string) => path.startsWith('kernels/') && path.endsWith('.ref.ts');

/** `path:line imports specifier` for each run-time import of a reference outside the leaf. */
function referenceLeafViolations(references: string[]): string[] {
  return references.flatMap((path) =>
    importsOf(path)
      .filter((i) => !i.typeOnly)
      .filter((i) => !isReference(i.target) && !LEAVES.includes(i.target))
      .map((i) => `${path}:${i.line} imports ${i.specifier}`),
  );
}

/** `path:line imports specifier` for each import of a reference (type-only included) by production code. */
function productionReferenceImports(files: string[]): string[] {
  return files.flatMap((path) =>
    importsOf(path)
      .filter((i) => isReference(i.target) || i.target.startsWith('kernels/ref/'))
      .map((i) => `${path}:${i.line} imports ${i.specifier}`),
  );
}

describe('the CPU references are a leaf', () => {
  const references = sourceFiles('kernels').filter(isReference);

  it('finds the references next to their ops', () => {
    expect(references.length).toBeGreaterThan(20);
    expect(references).toContain('kernels/ppo/gae.ref.ts');
  });

  it('a reference imports only references, the leaf modules, and types', () => {
    expect(referenceLeafViolations(references)).toEqual([]);
  });

  it('the leaf modules import nothing but each other', () => {
    const outside = LEAVES.flatMap((path) =>
      importsOf(path)
        .filter((i) => !LEAVES.includes(i.target))
        .map((i) => `${path}:${i.line} imports ${i.specifier}`),
    );
    expect(outside).toEqual([]);
  });

  it('production code (engine/, models/ but models/ref/, ppo/) imports no reference', () => {
    const production = [...sourceFiles('engine'), ...sourceFiles('models'), ...sourceFiles('ppo')].filter(
      (p) => !p.startsWith('models/ref/'),
    );
    expect(production.length).toBeGreaterThan(50);
    expect(productionReferenceImports(production)).toEqual([]);
  });
});
