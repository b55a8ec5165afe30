// Temporary directories for tests, each removed when its test file ends: importing this module registers the
// file's afterAll that deletes every directory made through it, so no test leaves anything in the OS temp dir.
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const made: string[] = [];

afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory `<os tmpdir>/<prefix>XXXXXX`, removed after this test file. */
export async function makeTempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** makeTempDir for code that cannot await (describe bodies, synchronous helpers). */
export function makeTempDirSync(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
