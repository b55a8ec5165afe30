// The process a user starts is the job (engine/native-stderr-node.ts): every entry point runs its work in a child
// for the stderr filter, and a `kill -9` of the process the user started (as `timeout -s KILL` and an OOM killer
// send) ends that child too, within about a second, so no worker trains on holding the run's lock. Checked with ps
// over every entry point, each killed while its child is loading or running.
import { describe, it, expect } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { alive, childrenOf, sleep } from '../support/processes.ts';

/** Starts `node entry args`, waits for its worker child, kills the launcher with SIGKILL and returns how long the
 *  worker outlived it (ms), or null if the worker had already ended on its own before the kill. */
async function killLauncher(entry: string, args: string[], settleMs: number): Promise<number | null> {
  const launcher = spawn(process.execPath, [entry, ...args], { stdio: 'ignore' });
  const launched = new Promise((r) => launcher.on('exit', r));
  let worker: number | undefined;
  for (let i = 0; i < 400 && worker === undefined; i++) {
    worker = childrenOf(launcher.pid!)[0];
    if (worker === undefined) await sleep(25);
  }
  expect(worker, `${entry}: no worker child appeared`).toBeDefined();
  await sleep(settleMs);
  if (!alive(worker!)) return null;
  const killed = performance.now();
  launcher.kill('SIGKILL');
  await launched;
  while (alive(worker!) && performance.now() - killed < 10_000) await sleep(20);
  expect(alive(worker!), `${entry}: its worker ${worker} outlived the launcher's SIGKILL by 10 s`).toBe(false);
  return performance.now() - killed;
}

const ENTRY_ARGS: Record<string, string[]> = {
  // train.js without arguments runs the built-in job: the device opens and it trains.
  'train.js': [],
  'sft.js': ['trainer.total_training_steps=1'],
  'reward-model.js': ['trainer.total_training_steps=1'],
  'serve.js': ['--model', 'demo/public/warm-start', '--port', '0'],
};

describe('the process you start is the job', () => {
  const entries = [
    ...readdirSync('.').filter((f) => f.endsWith('.js')),
    ...readdirSync('tools')
      .filter((f) => f.endsWith('.js'))
      .map((f) => `tools/${f}`),
  ].filter((f) => readFileSync(f, 'utf8').includes('runWithFilteredStderr()'));

  it.each(entries)('kill -9 of `node %s` ends its worker too', { timeout: 60_000 }, async (entry) => {
    // Killed twice: once while the worker loads its modules, once a while later (running, or ended on its own).
    const early = await killLauncher(entry, ENTRY_ARGS[entry] ?? [], 0);
    expect(early).not.toBeNull();
    expect(early!).toBeLessThan(3000);
    const later = await killLauncher(entry, ENTRY_ARGS[entry] ?? [], 2500);
    if (later !== null) expect(later).toBeLessThan(3000);
  });

  it("an entry point that a worker starts as a plain child is not tied to that worker's launcher", () => {
    const run = spawnSync(process.execPath, ['--import', './tools/node-loader.js', 'test/support/spawning-worker.ts'], {
      encoding: 'utf8',
    });
    expect(run.status).toBe(5);
  });
});
