// Runs the trainer's command line in-process, capturing what it prints (stdout, console.log and console.error).
import { vi } from 'vitest';
import { main, type MainOptions } from '../../ppo/jobs/ppo-job-node.ts';

interface Printed {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs main(argv) capturing what it prints. */
export async function runCli(
  argv: string[],
  env: Record<string, string> = {},
  options: MainOptions = {},
): Promise<Printed> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  const log = vi.spyOn(console, 'log').mockImplementation((...parts) => {
    stdout += `${parts.join(' ')}\n`;
  });
  const error = vi.spyOn(console, 'error').mockImplementation((...parts) => {
    stderr += `${parts.join(' ')}\n`;
  });
  try {
    const code = await main(argv, { ...options, env });
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    log.mockRestore();
    error.mockRestore();
  }
}
