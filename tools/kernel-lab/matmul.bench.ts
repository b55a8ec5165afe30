// Bench cases of matmul for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { matmul, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import type { Engine } from '../../engine/index.ts';
import type { KernelBenchCase } from './bench-inputs.ts';

/** The model's matmul shapes as M x N x K: 1024³ for every layout, then a 1024-row batch through a
 *  384-wide layer (forward nt, input gradient nn, weight gradient tn); on a hardware GPU also 2048³ in every
 *  layout, the smallest cube whose output takes the gpu variant's wide tiles (1024³ takes its narrow ones). */
export function matmulCases(): KernelBenchCase[] {
  const shapes: [MatmulLayout, number, number, number, boolean?][] = [
    ['nt', 1024, 1024, 1024],
    ['nn', 1024, 1024, 1024],
    ['tn', 1024, 1024, 1024],
    ['nt', 1024, 384, 128],
    ['nn', 1024, 128, 384],
    ['tn', 128, 384, 1024],
    ['nt', 2048, 2048, 2048, true],
    ['nn', 2048, 2048, 2048, true],
    ['tn', 2048, 2048, 2048, true],
  ];
  return shapes.map(([layout, M, N, K, hardwareOnly]) => ({
    op: 'matmul',
    kernel: `matmul ${layout}`,
    shape: `${M}x${N}x${K}`,
    flops: 2 * M * N * K,
    naiveVariant: 'naive',
    // 2048³ is 17 GFLOP: seconds per run on a software device, where the GPU class may be forced.
    ...(hardwareOnly ? { runsOn: (engine: Engine) => !engine.caps.softwareAdapter } : {}),
    setup: (engine) => {
      const a = engine.tensor('bench-a', [M * K]);
      const b = engine.tensor('bench-b', [K * N]);
      const out = engine.tensor('bench-out', [M * N]);
      return () => matmul(engine, { a, b, out, M, N, K, layout });
    },
  }));
}
