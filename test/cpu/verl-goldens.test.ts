// The goldens in test/support/verl-case-goldens.ts are what tools/verl/goldens.py prints: numpy ports of verl's own
// functions (tools/verl/numpy_ports.py) on the inputs of test/webgpu/verl-case-routes.test.ts. Needs python3 with
// numpy (tools/setup.sh installs Debian's python3-numpy); without them this test is skipped with the reason printed,
// except in CI, where it fails.
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from '../support/import-graph.ts';
import { GOLDENS } from '../support/verl-case-goldens.ts';

const SCRIPT = join(REPO_ROOT, 'tools/verl/goldens.py');

function pythonWithNumpy(): string | null {
  const probe = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' });
  if (probe.error) return `python3 not found (${probe.error.message})`;
  if (probe.status !== 0) return `python3 cannot import numpy (${probe.stderr.trim().split('\n').pop()})`;
  return null;
}

/**
 * Every number of `golden` against the same path in `got`, to 1e-10 (the goldens keep 12 significant digits; the
 * script and they agree to 5e-12).
 */
function expectSame(got: unknown, golden: unknown, path: string): void {
  if (typeof golden === 'number') {
    expect(typeof got, `${path} is a number`).toBe('number');
    expect(Math.abs((got as number) - golden), `${path}: script ${got}, golden ${golden}`).toBeLessThanOrEqual(
      1e-10 * (1 + Math.abs(golden)),
    );
  } else if (Array.isArray(golden)) {
    expect((got as unknown[]).length, `${path} length`).toBe(golden.length);
    golden.forEach((g, i) => expectSame((got as unknown[])[i], g, `${path}[${i}]`));
  } else {
    const object = golden as Record<string, unknown>;
    expect(Object.keys(got as object).sort(), `${path} keys`).toEqual(Object.keys(object).sort());
    for (const key of Object.keys(object))
      expectSame((got as Record<string, unknown>)[key], object[key], `${path}.${key}`);
  }
}

describe('verl-case goldens', () => {
  const missing = pythonWithNumpy();
  if (missing !== null && process.env.CI) {
    it('needs python3 with numpy in CI (tools/setup.sh installs python3-numpy)', () => expect.fail(missing));
    return;
  }
  if (missing !== null) {
    console.warn(`skipped: tools/verl/goldens.py needs python3 with numpy: ${missing}`);
    it.skip(`needs python3 with numpy to rerun tools/verl/goldens.py (${missing})`, () => {});
    return;
  }

  it('equal what the numpy ports of verl print', () => {
    const run = spawnSync('python3', [SCRIPT], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    const printed = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(Object.keys(printed).sort()).toEqual(Object.keys(GOLDENS).sort());
    for (const [key, value] of Object.entries(printed)) expectSame(value, GOLDENS[key as keyof typeof GOLDENS], key);
  });
});
