// One run per run directory: a lock file naming the owner's PID and host, taken when the run first writes the
// directory and removed when it ends (any way a process can run code at its end: return, error, process.exit on a
// stop signal). Two runs in one directory would otherwise interleave their metrics and checkpoints, and the
// second's fresh start would move the first's files aside while it writes them. A lock whose process is gone
// (same host, PID not alive: a run killed by SIGKILL or the machine's restart) is taken over, and says so.
import { readFileSync, unlinkSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { replaceFile } from '../../models/fs-node.ts';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { withFileContext } from '../config/user-error.ts';

export const LOCK_FILE = 'run.lock';

interface LockOwner {
  pid: number;
  host: string;
  started: string;
}

/** Whether a process of this host with that PID is alive (EPERM: alive, another user's). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readOwner(file: string): Promise<LockOwner | null> {
  try {
    const owner = JSON.parse(await readFile(file, 'utf8')) as Partial<LockOwner>;
    return Number.isInteger(owner.pid) && typeof owner.host === 'string'
      ? { pid: owner.pid!, host: owner.host, started: String(owner.started) }
      : null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    // A lock file torn by a crash mid-write names nobody: treat it as stale.
    return { pid: 0, host: hostname(), started: 'unknown' };
  }
}

/**
 * A lock held by a live run: another process on this host that is alive, or a run on another host (which this host
 * cannot check).
 */
function heldByAnother(owner: LockOwner): boolean {
  if (owner.host !== hostname()) return true;
  return owner.pid !== process.pid && owner.pid > 0 && processAlive(owner.pid);
}

function refusal(runDir: string, owner: LockOwner): Error {
  return new Error(
    `trainer.default_local_dir=${runDir} is in use by another run (pid ${owner.pid} on ${owner.host}, since ` +
      `${owner.started}) — ` +
      `wait for it to end or use another directory; if that run is gone, remove ${join(runDir, LOCK_FILE)}`,
  );
}

/** Before any input loads: refuses at once when a live run holds the directory (nothing is written). */
export async function checkRunLockFree(runDir: string): Promise<void> {
  const owner = await readOwner(join(runDir, LOCK_FILE));
  if (owner && heldByAnother(owner)) throw refusal(runDir, owner);
}

/**
 * Takes the run directory's lock (the directory exists); `say` reports a stale lock taken over. Returns the function
 * that releases it, which also runs at process exit.
 */
export async function acquireRunLock(runDir: string, say: (line: string) => void): Promise<() => void> {
  const file = join(runDir, LOCK_FILE);
  const me: LockOwner = { pid: process.pid, host: hostname(), started: new Date().toISOString() };
  const text = `${JSON.stringify(me)}\n`;
  await withFileContext(`locking ${file}`, async () => {
    try {
      const handle = await open(file, 'wx');
      await handle.writeFile(text);
      await handle.close();
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = await readOwner(file);
    if (owner && heldByAnother(owner)) throw refusal(runDir, owner);
    if (owner && owner.pid !== process.pid)
      say(`took over ${file}: its run (pid ${owner.pid} on ${owner.host}) is gone`);
    await replaceFile(file, text);
  });
  const release = () => {
    process.off('exit', release);
    try {
      // Only our own lock: a run that took over a lock we lost (it cannot happen while we live) keeps its own.
      if ((JSON.parse(readFileSync(file, 'utf8')) as LockOwner).pid === process.pid) unlinkSync(file);
    } catch {
      // Already gone (the directory was removed): nothing to release.
    }
  };
  process.on('exit', release);
  return release;
}
