// Which folder may import which, checked on every import statement of the project (test/support/import-graph.ts).
// A new rule is one more row of RULES.
import { describe, it, expect } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { importViolations, importsIn, REPO_ROOT, type ImportRule } from '../support/import-graph.ts';

const TIERS = ['cpu', 'webgpu', 'gpu', 'browser'];

const RULES: ImportRule[] = [
  { from: 'tools/', mustNotImport: 'test/', why: 'tools/ are programs: tests may import tools, never the reverse' },
  ...TIERS.flatMap((tier) =>
    TIERS.filter((other) => other !== tier).map(
      (other): ImportRule => ({
        from: `test/${tier}/`,
        mustNotImport: `test/${other}/`,
        why: 'test tiers share helpers through test/support/, not each other',
      }),
    ),
  ),
  {
    from: 'test/support/',
    mustNotImport: new RegExp(`^test/(${TIERS.join('|')})/`),
    why: 'test/support/ serves every tier and needs none',
  },
];

describe('import rules', () => {
  it('no import breaks a rule', () => {
    expect(importViolations(RULES)).toEqual([]);
  });

  it(
    'the scanner resolves static, multi-line, side-effect and dynamic imports, skips comments, and flags a broken ' +
      'rule',
    () => {
      const source = [
        "import { a } from '../../engine/index.ts';",
        'import {',
        '  b,',
        "} from '../support/arrays.ts';",
        "import type { C } from './c.ts';",
        "import '../setup.js';",
        "export * from '../../models/index.ts';",
        "// import { old } from '../../gone.ts';",
        "export const path = './not-an-import.ts';",
        "const { main } = await import('../../tools/verl-case.ts');",
        "import { describe } from 'vitest';",
      ].join('\n');
      const edges = importsIn('test/cpu/probe.test.ts', source);
      expect(edges.map((e) => `${e.line}:${e.target}`)).toEqual([
        '1:engine/index.ts',
        '2:test/support/arrays.ts',
        '5:test/cpu/c.ts',
        '6:test/setup.js',
        '7:models/index.ts',
        '10:tools/verl-case.ts',
      ]);
      expect(edges.filter((e) => e.typeOnly).map((e) => e.line)).toEqual([5]);
      expect(
        importsIn('test/cpu/probe.test.ts', source, { packages: true })
          .map((e) => e.target)
          .at(-1),
      ).toBe('vitest');
      const violations = importViolations(
        [{ from: 'test/cpu/', mustNotImport: 'tools/', why: 'probe' }],
        ['test/cpu/probe.test.ts'],
        (file) => importsIn(file, source),
      );
      expect(violations).toEqual(['test/cpu/probe.test.ts:10 imports tools/verl-case.ts (probe)']);
    },
  );

  it('test tiers hold only *.test.ts files; their helpers and data live in test/support/', () => {
    for (const tier of TIERS) {
      const others = readdirSync(join(REPO_ROOT, 'test', tier), { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile() && !e.name.endsWith('.test.ts'))
        .map((e) => e.name);
      expect(others, `test/${tier}/`).toEqual([]);
    }
  });
});
