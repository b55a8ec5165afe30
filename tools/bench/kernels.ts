// `node tools/bench.js kernels`: per-kernel timings at the shapes the model runs. Each kernel contributes a
// list of cases; a case with a naive baseline is timed twice and reports vs_naive.
import type { Engine } from '../../engine/index.ts';
import { timeKernel, withVariant, type KernelBenchRow } from './harness.ts';
import { matmul, type MatmulLayout } from '../../kernels/matmul.ts';

export type { KernelBenchRow } from './harness.ts';

export interface KernelBenchCase {
  /** Op name as WEBGPU_KERNEL_VARIANTS knows it. */
  op: string;
  /** Row label (op plus what distinguishes the case, e.g. its layout). */
  kernel: string;
  shape: string;
  flops?: number;
  bytes?: number;
  /** Variant to time as the baseline under the same inputs, for vs_naive. */
  naiveVariant?: string;
  /** Allocates the inputs once and returns the function that records one run. */
  setup: (engine: Engine) => () => void;
}

/** The model's matmul shapes as M x N x K: 1024³ for every layout, then a 1024-row batch through a
 *  384-wide layer (forward nt, input gradient nn, weight gradient tn). */
export function matmulCases(): KernelBenchCase[] {
  const shapes: [MatmulLayout, number, number, number][] = [
    ['nt', 1024, 1024, 1024], ['nn', 1024, 1024, 1024], ['tn', 1024, 1024, 1024],
    ['nt', 1024, 384, 128], ['nn', 1024, 128, 384], ['tn', 128, 384, 1024],
  ];
  return shapes.map(([layout, M, N, K]) => ({
    op: 'matmul',
    kernel: `matmul ${layout}`,
    shape: `${M}x${N}x${K}`,
    flops: 2 * M * N * K,
    naiveVariant: 'naive',
    setup: (engine) => {
      const a = engine.tensor('bench-a', [M * K]);
      const b = engine.tensor('bench-b', [K * N]);
      const out = engine.tensor('bench-out', [M * N]);
      return () => matmul(engine, { a, b, out, M, N, K, layout });
    },
  }));
}

const CASES: (() => KernelBenchCase[])[] = [matmulCases];

export async function benchmarkKernels(engine: Engine): Promise<KernelBenchRow[]> {
  const rows: KernelBenchRow[] = [];
  for (const benchCase of CASES.flatMap((cases) => cases())) {
    const run = benchCase.setup(engine);
    const time = (samples?: number) =>
      timeKernel(engine, benchCase.kernel, benchCase.shape, run, { flops: benchCase.flops, bytes: benchCase.bytes, samples });
    const row = await time();
    if (benchCase.naiveVariant) {
      const naive = await withVariant(engine, benchCase.op, benchCase.naiveVariant, () => time(3));
      row.vs_naive = naive.ms / row.ms;
    }
    rows.push(row);
  }
  return rows;
}
