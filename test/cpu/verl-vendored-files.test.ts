// verl's files under test/support/data/verl-1dda039b and verl-b178a3cd are verl's own: each one's git blob SHA-1
// (sha1 of "blob <bytes>\0" + the bytes) is the one MANIFEST.json names at verl's commit, so none was retyped or
// edited, and every file of the folder is in the manifest.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it, expect } from 'vitest';
import { VERL_B178A3CD_ROOT, VERL_HEAD_ROOT } from '../support/verl-script-argv.ts';

interface Manifest {
  files: { path: string; repo: string; commit: string; blob: string }[];
}

const gitBlobSha = (bytes: Buffer) =>
  createHash('sha1')
    .update(Buffer.concat([Buffer.from(`blob ${bytes.length}\0`), bytes]))
    .digest('hex');

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

describe.each([VERL_HEAD_ROOT, VERL_B178A3CD_ROOT])('%s', (root) => {
  const manifest: Manifest = JSON.parse(readFileSync(join(root, 'MANIFEST.json'), 'utf8'));

  it.each(manifest.files)('$path is $repo@$commit blob $blob', ({ path, blob }) => {
    expect(gitBlobSha(readFileSync(join(root, path)))).toBe(blob);
  });

  it('holds nothing besides the files of its manifest', () => {
    const listed = new Set([...manifest.files.map((f) => f.path), 'MANIFEST.json']);
    expect(
      filesUnder(root)
        .map((file) => relative(root, file))
        .filter((file) => !listed.has(file)),
    ).toEqual([]);
  });
});
