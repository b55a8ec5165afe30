// `node serve.js` as a child process, for the servers benchmark and the trainer-with-servers test: resolved with its
// URL once it prints the line it listens on, rejected with its stderr if it exits first.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ServeProcess {
  url: string;
  /** Samples it decodes at once (its start line). */
  slots: number;
  child: ChildProcess;
}

export function startServeJs(modelDir: string, extraArgs: readonly string[] = []): Promise<ServeProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['serve.js', '--model', modelDir, '--port', '0', ...extraArgs], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '',
      stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    child.stdout!.on('data', (d) => {
      stdout += d;
      const m = /on (http:\/\/127\.0\.0\.1:\d+) with (\d+) decode slots/.exec(stdout);
      if (m) resolve({ url: m[1], slots: Number(m[2]), child });
    });
    child.on('exit', (code) => reject(new Error(`serve.js --model ${modelDir} exited with ${code}: ${stderr.trim()}`)));
  });
}

/** Linux's USER_HZ: /proc reports CPU time in these ticks. */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system) in ms of the task whose /proc stat file this is: a process, or one of its threads. */
function taskCpuMs(statPath: string): number {
  // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
  const fields = readFileSync(statPath, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

/** A process and its living descendants (serve.js serves in a child of its own). */
function processTree(pid: number): number[] {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  return [pid, ...children.flatMap((child) => processTree(Number(child)))];
}

/**
 * CPU time in ms that a process and its living descendants have used: all their threads (`all`) and their main
 * threads alone (`main`: the JavaScript thread; the others are the device's, Dawn's and V8's); null where there is
 * no /proc. `descendants: false`: the process alone.
 */
export function processTreeCpuMs(pid: number, descendants = true): { all: number; main: number } | null {
  try {
    const pids = descendants ? processTree(pid) : [pid];
    return {
      all: pids.reduce((sum, p) => sum + taskCpuMs(`/proc/${p}/stat`), 0),
      main: pids.reduce((sum, p) => sum + taskCpuMs(`/proc/${p}/task/${p}/stat`), 0),
    };
  } catch {
    return null;
  }
}
