// Kernel timing on any WebGPU device, timestamp queries or not: many dispatches recorded into one submit, one
// sync, divided by the count; the first run (pipeline compile, lazy allocation) is excluded; the median of
// several samples is reported so a busy machine skews one sample, not the result. On a software device the
// process's CPU time per run is reported too: it barely moves when other processes share the cores.
import type { Engine } from '../../engine/index.ts';

export interface KernelBenchRow {
  kernel: string;
  /** Problem size as the kernel names its dims, e.g. "1024x1024x1024" for M x N x K. */
  shape: string;
  ms: number;
  gflops?: number;
  gbps?: number;
  /** Software devices: CPU time of this process per run (all lavapipe threads), median of the samples. */
  cpu_ms?: number;
  /** Naive variant's ms over this row's ms, where the kernel keeps a naive baseline. */
  vs_naive?: number;
  /**
   * The op's CPU reference (kernels/<family>/<op>.ref.ts, float64) ms over this row's ms, where the kernel has no naive
   * variant.
   */
  vs_cpu?: number;
}

export interface TimingOptions {
  /** Floating-point operations of one run, for GFLOP/s. */
  flops?: number;
  /** Bytes one run must move at least, for GB/s. */
  bytes?: number;
  /** Runs per sample; by default enough for a sample of about `targetMs`. */
  reps?: number;
  /** Samples whose median is reported. */
  samples?: number;
  targetMs?: number;
}

interface Sample {
  ms: number;
  cpuMs: number;
}

async function timeRuns(engine: Engine, run: () => void, reps: number): Promise<Sample> {
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  for (let i = 0; i < reps; i++) run();
  await engine.sync();
  const cpu = process.cpuUsage(cpuStart);
  return { ms: (performance.now() - start) / reps, cpuMs: (cpu.user + cpu.system) / 1000 / reps };
}

/**
 * The integer a `--name=N` flag gives (`fallback` where it is absent); one line naming the flag where N is not an
 * integer ≥ `min` (`why`: what the bound is for).
 */
export function integerFlag<F extends number | null>(
  argv: readonly string[],
  name: string,
  fallback: F,
  min = 1,
  why = '',
): number | F {
  const given = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  if (given === undefined) return fallback;
  const value = Number(given);
  if (!Number.isInteger(value) || value < min)
    throw new Error(`--${name}=${given}: expected an integer ≥ ${min}${why ? ` (${why})` : ''}`);
  return value;
}

/** The middle value; of an even count, the mean of the two middle values. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Times `run` (which records dispatches and must not read back). */
export async function timeKernel(
  engine: Engine,
  kernel: string,
  shape: string,
  run: () => void,
  options: TimingOptions = {},
): Promise<KernelBenchRow> {
  const { flops, bytes, samples = 5, targetMs = 200 } = options;
  await timeRuns(engine, run, 1);
  let reps = options.reps;
  const times: Sample[] = [];
  if (reps === undefined) {
    const probe = await timeRuns(engine, run, 1);
    reps = Math.max(1, Math.min(1000, Math.round(targetMs / probe.ms)));
    // A probe that took a whole sample's time is a sample: a slow kernel (a naive 1024³ matmul) runs once less.
    if (reps === 1) times.push(probe);
  }
  while (times.length < samples) times.push(await timeRuns(engine, run, reps));
  const ms = median(times.map((t) => t.ms));
  const row: KernelBenchRow = { kernel, shape, ms };
  if (engine.caps.softwareAdapter) row.cpu_ms = median(times.map((t) => t.cpuMs));
  if (flops !== undefined) row.gflops = flops / ms / 1e6;
  if (bytes !== undefined) row.gbps = bytes / ms / 1e6;
  return row;
}

/** Runs `body` with WEBGPU_KERNEL_VARIANTS forcing `variant` of `op`, restoring the previous choice after. */
export async function withVariant<T>(engine: Engine, op: string, variant: string, body: () => Promise<T>): Promise<T> {
  const previous = engine.knobs.kernelVariants[op];
  engine.knobs.kernelVariants[op] = variant;
  try {
    return await body();
  } finally {
    if (previous === undefined) delete engine.knobs.kernelVariants[op];
    else engine.knobs.kernelVariants[op] = previous;
  }
}

/** Milliseconds of one synchronous run of `body` (a CPU reference): the median of as many runs as fit about
 *  `budgetMs` (at most `maxSamples`) after a first one for the JIT; a reference slower than the budget is run
 *  once, its warm-up being a negligible part of it. */
export function timeReference(body: () => unknown, budgetMs = 1000, maxSamples = 7): number {
  const timed = () => {
    const start = performance.now();
    body();
    return performance.now() - start;
  };
  const first = timed();
  const samples = Math.min(maxSamples, Math.floor(budgetMs / first));
  return samples === 0 ? first : median(Array.from({ length: samples }, timed));
}
