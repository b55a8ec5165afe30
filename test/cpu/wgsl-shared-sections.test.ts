// Shader code shared by several kernels lives in one section that their launchers prepend, not in copies: the
// attention passes' k/v tile staging (attention-key-tile.wgsl, forward and dq), the per-column weight gradient of
// rmsnorm and value-head (util/column-grad.wgsl) and the decode row kernels' reductions (decode/row-reduce.wgsl).
// Each check names a line only that code has.
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../support/import-graph.ts';

function wgslFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? wgslFiles(join(dir, entry.name))
      : entry.name.endsWith('.wgsl')
        ? [join(dir, entry.name)]
        : [],
  );
}

const FILES = wgslFiles(join(REPO_ROOT, 'kernels'));

/** The kernels/ .wgsl files with a line equal to `line` (trimmed). */
function filesWith(line: string): string[] {
  return FILES.filter((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .some((l) => l.trim() === line),
  ).map((file) => relative(REPO_ROOT, file));
}

describe('shared WGSL sections', () => {
  it('the k/v tile staging of the attention passes is written once', () => {
    expect(filesWith('kvTile[TILE * HS4 + i] = vx;')).toEqual(['kernels/attention/attention-key-tile.wgsl']);
  });

  it('the decode row kernels share one set of reductions', () => {
    expect(filesWith('if (lid < stride) { reduceValue[lid] += reduceValue[lid + stride]; }')).toEqual([
      'kernels/decode/row-reduce.wgsl',
    ]);
  });

  it('the column-tile weight gradient of rmsnorm and value-head is written once', () => {
    // head-rmsnorm's tile is another shape (8 columns of the q or k weight, summed over heads) and keeps its own.
    expect(filesWith('columnPartial[lane] = acc;')).toEqual([
      'kernels/layers/head-rmsnorm.wgsl',
      'kernels/util/column-grad.wgsl',
    ]);
  });
});
