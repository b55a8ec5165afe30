// Every case of verl's recorded sample through tools/verl-case.ts (the code path of `node tools/verl-case.js`),
// plus one run of the CLI itself.
import { it, expect } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { gpuEngine } from '../support/gpu-engine.ts';
import { describeWithFixtures, readFixtureJson } from '../support/fixtures.ts';
import { runVerlCase, type VerlCase } from '../../tools/verl-case.ts';
import { makeTempDirSync } from '../support/temp-dir.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
type RecordedCase = VerlCase & { id: string; outputs: unknown; raises?: string };

// float32 kernels against verl's float64: one f32 rounding is 6e-8 relative; exp/log, whitening (division by a
// std of ~1) and sums of up to a few hundred terms grow that to ~1e-6, so 1e-5 absolute + 1e-5 relative has
// margin while any semantic difference (a wrong mask, denominator or clamp) shows up at 1e-3 or more.
const ATOL = 1e-5;
const RTOL = 1e-5;

function compare(actual: unknown, expected: unknown, path: string): void {
  if (typeof expected === 'number') {
    expect(typeof actual, `${path} is a number`).toBe('number');
    const error = Math.abs((actual as number) - expected);
    if (!(error <= ATOL + RTOL * Math.abs(expected)))
      throw new Error(`${path}: got ${actual}, verl ${expected} (|diff| ${error.toExponential(2)})`);
  } else if (Array.isArray(expected)) {
    expect(Array.isArray(actual), `${path} is an array`).toBe(true);
    expect((actual as unknown[]).length, `${path} length`).toBe(expected.length);
    expected.forEach((e, i) => compare((actual as unknown[])[i], e, `${path}[${i}]`));
  } else if (expected && typeof expected === 'object') {
    for (const [key, e] of Object.entries(expected))
      compare((actual as Record<string, unknown>)[key], e, `${path}.${key}`);
  } else {
    expect(actual, path).toEqual(expected);
  }
}

function recordedCases(fixturePath: string): { case_count: number; cases: RecordedCase[] } {
  const fixture = readFixtureJson<{ case_count: number; cases: RecordedCase[] }>(fixturePath);

  it('holds all the cases it announces', () => {
    expect(fixture.cases.length).toBe(fixture.case_count);
  });

  for (const c of fixture.cases) {
    it(c.id, async () => {
      const engine = await gpuEngine();
      if (c.raises) {
        // The refusal must be verl's own: our message opens with the words of verl's (its exception type dropped).
        const opening = c.raises
          .replace(/^\w+(Error|Exception):\s*/, '')
          .split(/\s+/)
          .slice(0, 3)
          .join(' ');
        await expect(runVerlCase(engine, c)).rejects.toThrow(opening);
        return;
      }
      compare(await runVerlCase(engine, c), c.outputs, c.id);
    });
  }
  return fixture;
}

describeWithFixtures('verl sample cases (b178a3cd and v0.2)', ['verl/sample.json'], () => {
  const fixture = recordedCases('verl/sample.json');

  it('prints {"outputs": ...} from the command line', () => {
    const c = fixture.cases.find((x) => x.function.endsWith('kl_penalty'))!;
    const file = join(makeTempDirSync('verl-case-'), 'case.json');
    writeFileSync(file, JSON.stringify(c));
    const printed = JSON.parse(execFileSync('node', ['tools/verl-case.js', file], { cwd: root, encoding: 'utf8' }));
    compare(printed.outputs, c.outputs, `cli ${c.id}`);
  });
});

describeWithFixtures('verl sample cases (verl-project/verl 1dda039b)', ['verl/sample-verl_1dda039b.json'], () => {
  recordedCases('verl/sample-verl_1dda039b.json');
});
