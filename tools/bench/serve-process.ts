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

/**
 * CPU time (user + system, all threads) in ms that a process and its living descendants have used, from /proc (serve.js
 * serves in a child of its own); null where there is no /proc.
 */
export function processTreeCpuMs(pid: number): number | null {
  try {
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const own = ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    return children.reduce((sum, child) => sum + (processTreeCpuMs(Number(child)) ?? 0), own);
  } catch {
    return null;
  }
}
