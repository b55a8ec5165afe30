// Outside truth: Hugging Face checkpoints and verl's recorded cases, produced by the reference implementations and
// never copied into the project. They live in RLHF_FIXTURES_DIR, by default ../shared/fixtures beside the repository.
// A test that reads them sits in describeWithFixtures: without them it is skipped with one line saying what is
// missing, except under CI=true, where a missing fixture fails the test.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const FIXTURES_DIR = resolve(process.env.RLHF_FIXTURES_DIR || join(REPO_ROOT, '../shared/fixtures'));

const IN_CI = process.env.CI === 'true' || process.env.CI === '1';

/** A fixture's absolute path: `fixturePath('hf/llama-tiny')`. */
export function fixturePath(relative: string): string {
  return join(FIXTURES_DIR, relative);
}

export function readFixtureJson<T = any>(relative: string): T {
  return JSON.parse(readFileSync(fixturePath(relative), 'utf8')) as T;
}

/**
 * Why the given fixtures cannot be read, or null when all are there. A missing directory is named alone, so a
 * file whose tests need several fixtures prints one line; a directory lacking some files names those files.
 */
function missingFixturesMessage(files: readonly string[]): string | null {
  const missing = files.filter((f) => !existsSync(fixturePath(f)));
  if (missing.length === 0) return null;
  if (!existsSync(FIXTURES_DIR)) {
    return (
      `outside-truth fixtures not found at ${FIXTURES_DIR}; set RLHF_FIXTURES_DIR to a copy of shared/fixtures ` +
      `or clone with ../shared beside the repo`
    );
  }
  return (
    `${missing.join(', ')} missing from the outside-truth fixtures at ${FIXTURES_DIR}; set RLHF_FIXTURES_DIR to ` +
    `a complete copy of shared/fixtures`
  );
}

// Vitest loads this module afresh for each test file, so each reason is printed once per file.
const printed = new Set<string>();

/**
 * describe(name, body) when every file in `files` (relative to FIXTURES_DIR) exists. Otherwise the body is never
 * run (it may read the fixtures while collecting, e.g. for it.each): one skipped test names what is missing, and
 * the reason is printed once; under CI=true that test fails with the reason instead.
 */
export function describeWithFixtures(name: string, files: readonly string[], body: () => void): void {
  const reason = missingFixturesMessage(files);
  if (reason === null) {
    describe(name, body);
    return;
  }
  const title = `needs outside-truth fixtures: ${files.join(', ')}`;
  if (IN_CI) {
    describe(name, () =>
      it(title, () => {
        throw new Error(`CI=true, so a missing fixture fails: ${reason}`);
      }),
    );
    return;
  }
  if (!printed.has(reason)) {
    printed.add(reason);
    console.warn(`skipped: ${reason}`);
  }
  describe(name, () => it.skip(title, () => {}));
}
