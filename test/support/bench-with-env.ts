// `node tools/bench.js ARGS` in-process with one environment variable set, and the lines it printed on stderr: how
// the knob tests show that a bad knob stops the benchmarks with one line before any device starts.
import { vi } from 'vitest';
import { runBenchmarks } from '../../tools/bench/cli.ts';

export async function benchWithEnv(
  name: string,
  value: string,
  argv: string[],
): Promise<{ code: number; errors: string[] }> {
  vi.stubEnv(name, value);
  const errors: string[] = [];
  const error = vi.spyOn(console, 'error').mockImplementation((...parts) => {
    errors.push(parts.join(' '));
  });
  try {
    return { code: await runBenchmarks(argv), errors };
  } finally {
    error.mockRestore();
    vi.unstubAllEnvs();
  }
}
