// Dawn writes some lines straight to file descriptor 2 from native code, where Node's process.stderr cannot see
// them, and Node cannot re-point a descriptor of its own process. So an entry point (train.js) runs itself as a
// child whose stderr is a pipe, and passes every line on except those engine/device.ts lists as known to be
// harmless, matched whole: any other device warning, error or stack trace passes unchanged. The child runs in its
// own process group, so a terminal's Ctrl-C reaches it once, through this parent, as a `kill` of this process does
// (a second signal means "abandon the step" to the trainer: it must not arrive twice). stdout is the child's own.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { HARMLESS_DAWN_STDERR_LINES } from './device.ts';

const CHILD_MARK = 'WEBGPU_RLHF_STDERR_FILTERED';
/** The signals that ask a run to stop (ppo/jobs/stop-signals-node.ts handles them in the child): this parent forwards
 *  each to the child, so the two lists cannot drift apart. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export function isHarmlessDeviceLine(line: string): boolean {
  return HARMLESS_DAWN_STDERR_LINES.some((pattern) => pattern.test(line));
}

/**
 * In the parent: runs this same command as a child with the filter on its stderr and resolves to its exit code.
 * In the child (or on Windows, where process groups differ): resolves to null, and the caller runs the program.
 */
export async function runWithFilteredStderr(): Promise<number | null> {
  if (process.env[CHILD_MARK] === '1' || process.platform === 'win32') return null;
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'pipe'],
    env: { ...process.env, [CHILD_MARK]: '1' },
    detached: true,
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
