// Process checks as a user makes them with ps: a process's children, and whether a process still runs.
import { execFileSync } from 'node:child_process';

/** The process ids whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map(Number);
  } catch {
    return []; // ps exits 1 when it lists nothing
  }
}

/**
 * Whether `pid` runs Node (as this process does): an entry point's worker, a pipeline's stage. Not tsx's esbuild
 * service, which a process runs or not depending on whether its modules' transforms were cached, and on when one looks.
 */
export function isNode(pid: number): boolean {
  try {
    const command = execFileSync('ps', ['-o', 'args=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    return command.split(' ')[0] === process.execPath;
  } catch {
    return false; // ps exits 1 when the process has ended
  }
}

/** Whether `pid` is a live process: a zombie (ended, not yet reaped by whoever adopted it) is not. */
export function alive(pid: number): boolean {
  try {
    const state = execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    return state !== '' && !state.startsWith('Z');
  } catch {
    return false;
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits up to `ms` for every one of `pids` to end; returns those still alive. */
export async function survivors(pids: readonly number[], ms: number): Promise<number[]> {
  const until = performance.now() + ms;
  while (pids.some(alive) && performance.now() < until) await sleep(20);
  return pids.filter(alive);
}
