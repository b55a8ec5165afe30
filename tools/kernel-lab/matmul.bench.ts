// Bench cases of matmul for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { matmul, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { seededRandom, type Engine, type Tensor } from '../../engine/index.ts';
import { randomValues, upload, type BenchCheck, type KernelBenchCase } from './bench-inputs.ts';
import { matmulProbeError } from './compare.ts';

/** Relative error Freivalds' check allows: float32 accumulation over K = 4096 stays near 1e-5; a wrong kernel ~1. */
const MATMUL_PROBE_TOLERANCE = 1e-3;

/**
 * Seeded random inputs for a matmul of this shape and the check of one run's output against them (Freivalds' probes
 * in float64: any size checks in O(MK + KN + MN)).
 */
export function matmulBench(
  engine: Engine,
  layout: MatmulLayout,
  M: number,
  N: number,
  K: number,
): { run: () => void; check: () => Promise<BenchCheck>; tensors: Tensor[] } {
  const aValues = randomValues(M * K, 21);
  const bValues = randomValues(K * N, 22);
  const a = upload(engine, 'a', aValues);
  const b = upload(engine, 'b', bValues);
  const out = engine.tensor('bench-out', [M * N]);
  return {
    run: () => matmul(engine, { a, b, out, M, N, K, layout }),
    check: async () => {
      const got = await engine.read(out);
      const error = matmulProbeError(
        aValues,
        bValues,
        got,
        { M, N, K, transposeA: layout === 'tn', transposeB: layout === 'nt' },
        seededRandom(23),
      );
      return {
        output: 'out',
        violation: error / MATMUL_PROBE_TOLERANCE,
        maxAbsError: error,
        tolerance: `relative ${MATMUL_PROBE_TOLERANCE} of out·r (Freivalds, 4 probes)`,
      };
    },
    tensors: [a, b, out],
  };
}

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
    setup: (engine) => matmulBench(engine, layout, M, N, K),
  }));
}
