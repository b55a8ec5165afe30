// The one-way layering, checked on the source: tools/, the entry points and demo/ → ppo/ → models/
// → engine/ + kernels/, nothing below importing from above. Within ppo/ the subfolders form a DAG (no two import
// each other, directly or through a third), so a reader can learn them bottom up:
//   config ← algorithm, loggers                          (the config's schema, the key parser, input errors)
//   data, rewards, environments: own option objects      (the config sections a caller passes; no PpoConfig)
//   generation ← training                               (the generation engine; the update loop every trainer shares)
//   environments → generation                           (multi-turn environments: Search-R1, the tool agent)
//   phases → algorithm, generation, training ← metrics
//   tasks → data, rewards, environments, training       (built-in tasks: their rows, reward and warm start)
//   sft, reward-model → data, training                  (supervised fine-tuning; a reward model on preference pairs)
//   tasks → sft                                         (the built-in model's warm start is SFT)
//   trainer.ts → phases, metrics, …;  run-directory → trainer;  serving → generation;  jobs → everything (the top)
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, importsOf as importEdges, sourceFiles } from '../support/import-graph.ts';

/** Repository-relative paths of the relative imports of `file`; with `loaded`, only those that load a module when
 *  it runs (not `import type`). */
function importsOf(file: string, loaded = false): string[] {
  return importEdges(file)
    .filter((e) => !(loaded && e.typeOnly))
    .map((e) => e.target);
}

/**
 * The ppo/ subfolder a file belongs to; ppo/config.ts is the config folder's entry, other top-level files are the
 * trainer's.
 */
function ppoLayer(path: string): string {
  const parts = path.split('/');
  if (parts.length === 2) return path === 'ppo/config.ts' ? 'config' : 'trainer';
  return parts[1];
}

const ppoFiles = sourceFiles('ppo');
const edges = ppoFiles.flatMap((file) => importsOf(file).map((to) => ({ from: file, to })));

describe('ppo/ import layers', () => {
  it('finds the imports it checks', () => {
    expect(ppoFiles.length).toBeGreaterThan(50);
    expect(edges.some((e) => e.from === 'ppo/trainer.ts' && e.to.startsWith('ppo/generation/'))).toBe(true);
  });

  it('ppo/ does not import tools/ or test/', () => {
    expect(edges.filter((e) => /^(tools|test)\//.test(e.to)).map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  it('models/, engine/ and kernels/ do not import ppo/', () => {
    const below = ['models', 'engine', 'kernels'].flatMap(sourceFiles);
    const upward = below.flatMap((file) =>
      importsOf(file)
        .filter((to) => to.startsWith('ppo/'))
        .map((to) => `${file} → ${to}`),
    );
    expect(upward).toEqual([]);
  });

  it('the config loads without kernel launchers (a kernels/ file it reaches imports only such files)', () => {
    const reached = new Set<string>();
    const visit = (file: string) => {
      if (reached.has(file)) return;
      reached.add(file);
      if (file.endsWith('.ts')) importsOf(file, true).forEach(visit);
    };
    visit('ppo/config.ts');
    // Plain data (vocabularies, mode tables) may import plain data; a launcher imports its shader or the engine.
    const plainData = (f: string): boolean =>
      f.startsWith('kernels/') && f.endsWith('.ts') && importsOf(f).every(plainData);
    const launchers = [...reached].filter((f) => f.startsWith('kernels/') && !plainData(f));
    expect(reached.size).toBeGreaterThan(5);
    expect(launchers).toEqual([]);
  });

  it('data/, environments/ and rewards/ declare their own options instead of importing the PPO config', () => {
    const config = (to: string) => to === 'ppo/config.ts' || to === 'ppo/config/schema.ts';
    const lower = edges.filter((e) => /^ppo\/(data|environments|rewards)\//.test(e.from) && config(e.to));
    expect(edges.some((e) => e.from.startsWith('ppo/jobs/') && config(e.to))).toBe(true);
    expect(lower.map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  it('no cycle between ppo/ subfolders', () => {
    const graph = new Map<string, Map<string, string>>();
    for (const { from, to } of edges) {
      if (!to.startsWith('ppo/')) continue;
      const [a, b] = [ppoLayer(from), ppoLayer(to)];
      if (a === b) continue;
      if (!graph.has(a)) graph.set(a, new Map());
      if (!graph.get(a)!.has(b)) graph.get(a)!.set(b, `${from} → ${to}`);
    }
    // A cycle shows as a layer reaching itself; report the imports along one such path.
    const cycles: string[] = [];
    for (const start of graph.keys()) {
      const seen = new Set<string>();
      const walk = (layer: string, path: string[]): boolean => {
        for (const [next, why] of graph.get(layer) ?? []) {
          if (next === start) return cycles.push([...path, why].join(' ; ')) > 0;
          if (seen.has(next)) continue;
          seen.add(next);
          if (walk(next, [...path, why])) return true;
        }
        return false;
      };
      walk(start, []);
    }
    expect(cycles).toEqual([]);
  });
});

describe('node-only modules', () => {
  const files = ['engine', 'models', 'kernels', 'ppo'].flatMap(sourceFiles);
  const nodeOnly = (file: string) => /-node\.(ts|js)$/.test(file);

  it('a module that imports a node: builtin is named *-node, so the browser demo never loads it', () => {
    const unnamed = files.filter(
      (f) => !nodeOnly(f) && /from\s+['"]node:|import\(\s*['"]node:/.test(readFileSync(join(REPO_ROOT, f), 'utf8')),
    );
    expect(unnamed).toEqual([]);
  });

  it('only *-node modules load *-node modules', () => {
    const leaks = files
      .filter((f) => !nodeOnly(f))
      .flatMap((f) =>
        importsOf(f, true)
          .filter(nodeOnly)
          .map((to) => `${f} → ${to}`),
      );
    expect(leaks).toEqual([]);
  });
});
