// Dawn writes some lines straight to file descriptor 2 from native code, where Node's process.stderr cannot see
// them, and Node cannot re-point a descriptor of its own process. So an entry point (train.js) runs itself as a
// child whose stderr is a pipe, and passes every line on except those engine/device.ts lists as known to be
// harmless, matched whole: any other device warning, error or stack trace passes unchanged. The child runs in its
// own process group, so a terminal's Ctrl-C reaches it once, through this parent, as a `kill` of this process does
// (a second signal means "abandon the step" to the trainer: it must not arrive twice). stdout is the child's own.
// The process a user starts is the job: a child in its own process group outlives a parent killed with SIGKILL
// (`kill -9`, `timeout -s KILL`, an OOM killer), so every child started here ends itself when its parent goes, and
// the parent's exit status is the child's.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Worker } from 'node:worker_threads';
import { HARMLESS_DAWN_STDERR_LINES } from './device.ts';

const CHILD_MARK = 'WEBGPU_RLHF_STDERR_FILTERED';
/** The process id of the parent a child started by spawnTiedChild must not outlive. */
const PARENT_MARK = 'WEBGPU_RLHF_PARENT_PID';
/** How often a tied child looks for its parent: a SIGKILL'd parent's child ends within this (plus a thread's start). */
const PARENT_POLL_MS = 200;
/** The signals that ask a run to stop (ppo/jobs/stop-signals-node.ts handles them in the child): this parent forwards
 *  each to the child, so the two lists cannot drift apart. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export function isHarmlessDeviceLine(line: string): boolean {
  return HARMLESS_DAWN_STDERR_LINES.some((pattern) => pattern.test(line));
}

/**
 * Starts `args` (a Node command line) as a child in its own process group, so that a terminal's Ctrl-C reaches it
 * only through this process, tied to this process: the child calls endWithParent (runWithFilteredStderr does), and
 * ends itself when this process is gone.
 */
export function spawnTiedChild(args: readonly string[], options: SpawnOptions): ChildProcess {
  return spawn(process.execPath, args, {
    ...options,
    env: { ...(options.env ?? process.env), [PARENT_MARK]: String(process.pid) },
    detached: process.platform !== 'win32',
  });
}

/**
 * In a child spawnTiedChild started: ends this process (SIGKILL, as its parent was) as soon as that parent is gone.
 * A thread watches, not a timer, so a main thread busy for seconds (a synchronous load, a tool that loops) cannot
 * delay it; the parent is gone when this process's parent id is no longer its id (the orphan was re-parented).
 */
export function endWithParent(): void {
  const parent = Number(process.env[PARENT_MARK]);
  // Read once and dropped: a process this one starts without spawnTiedChild is not tied to this one's parent.
  delete process.env[PARENT_MARK];
  if (!Number.isInteger(parent) || parent <= 0 || process.platform === 'win32') return;
  if (process.ppid !== parent) process.kill(process.pid, 'SIGKILL');
  const watcher = new Worker(
    `setInterval(() => { if (process.ppid !== ${parent}) process.kill(process.pid, 'SIGKILL'); }, ${PARENT_POLL_MS});`,
    { eval: true },
  );
  watcher.unref();
}

/**
 * In the parent: runs this same command as a child with the filter on its stderr and resolves to its exit code.
 * In the child (or on Windows, where process groups differ): resolves to null, and the caller runs the program.
 */
export async function runWithFilteredStderr(): Promise<number | null> {
  endWithParent();
  if (process.env[CHILD_MARK] === '1' || process.platform === 'win32') return null;
  const child = spawnTiedChild([...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'pipe'],
    env: { ...process.env, [CHILD_MARK]: '1' },
  });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  for (const signal of STOP_SIGNALS) process.on(signal, forward);
  const lines = createInterface({ input: child.stderr!, crlfDelay: Infinity });
  lines.on('line', (line) => {
    if (!isHarmlessDeviceLine(line)) process.stderr.write(`${line}\n`);
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (c, s) => resolve([c, s]));
  });
  for (const s of STOP_SIGNALS) process.off(s, forward);
  if (signal !== null) {
    // Ended by a signal it did not handle: end the same way, so the shell reports what it would have.
    process.kill(process.pid, signal);
    return 128;
  }
  return code ?? 1;
}
