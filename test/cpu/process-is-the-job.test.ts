// The process a user starts is the job (engine/native-stderr-node.ts): every entry point runs its work in a child
// for the stderr filter, and a `kill -9` of the process the user started (as `timeout -s KILL` and an OOM killer
// send) ends that child too, so no worker trains on holding the run's lock. Checked with ps over every entry point,
// each killed while its child is loading or running.
import { describe, it, expect } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { alive, childrenOf, isNode, sleep, survivors } from '../support/processes.ts';

/** How long a worker may outlive its launcher's SIGKILL: it ends when it next looks (every 200 ms, or once its
 *  modules load), which a loaded machine may delay by seconds; an untied long job (train.js, serve.js, qwen3-ppo-step)
 *  runs on far longer. */
const OUTLIVE_MS = 30_000;

/** Sends `name` to `pid`; false if no such process is left to receive it. */
function signal(pid: number, name: NodeJS.Signals): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch {
    return false;
  }
}

const STOP_AT_START = fileURLToPath(new URL('../support/stop-at-start.mjs', import.meta.url));

/** Whether `pid` is stopped (SIGSTOP). */
const stopped = (pid: number) =>
  spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' })
    .stdout.trim()
    .startsWith('T');

/** Starts `node entry args`, finds its worker child stopped at its start, lets it run `settleMs`, kills the launcher
 *  with SIGKILL and checks that the worker ends too; false if the worker had already ended on its own by then. */
async function killLauncher(entry: string, args: string[], settleMs: number): Promise<boolean> {
  const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${STOP_AT_START}` };
  const launcher = spawn(process.execPath, [entry, ...args], { stdio: 'ignore', env });
  const launched = new Promise((r) => launcher.on('exit', r));
  let worker: number | undefined;
  for (let i = 0; i < 400 && !(worker !== undefined && stopped(worker)); i++) {
    worker ??= childrenOf(launcher.pid!).find(isNode);
    await sleep(25);
  }
  expect(worker !== undefined && stopped(worker), `${entry}: no worker child stopped at its start`).toBe(true);
  // Stopped, the worker cannot end on its own between the look and the kill, however long this process is paused
  // there; it goes on once its launcher is gone. (Its own session: the launcher's death sends it no SIGHUP.)
  if (settleMs > 0) {
    signal(worker!, 'SIGCONT');
    await sleep(settleMs);
    if (!signal(worker!, 'SIGSTOP')) return false;
  }
  try {
    if (!alive(worker!)) return false;
    launcher.kill('SIGKILL');
    await launched;
  } finally {
    signal(worker!, 'SIGCONT');
  }
  expect(await survivors([worker!], OUTLIVE_MS), `${entry}: its worker outlived the launcher's SIGKILL`).toEqual([]);
  return true;
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

  it.each(entries)('kill -9 of `node %s` ends its worker too', { timeout: 120_000 }, async (entry) => {
    // Killed twice: before the worker loads its modules, and 2.5 s later (running, or ended on its own).
    expect(await killLauncher(entry, ENTRY_ARGS[entry] ?? [], 0)).toBe(true);
    await killLauncher(entry, ENTRY_ARGS[entry] ?? [], 2500);
  });

  it("an entry point that a worker starts as a plain child is not tied to that worker's launcher", () => {
    const run = spawnSync(process.execPath, ['--import', './tools/node-loader.js', 'test/support/spawning-worker.ts'], {
      encoding: 'utf8',
    });
    expect(run.status).toBe(5);
  });
});
