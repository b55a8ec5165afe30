// Bench cases of reduce for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { weightedSum } from '../../kernels/util/reduce.ts';
import { weightedSumRef } from '../../kernels/util/reduce.ref.ts';
import { F32_BYTES, ROWS, checkOutput, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** The SFT loss's deterministic single-workgroup dot product of per-token log-probs and weights. */
export function weightedSumCases(): KernelBenchCase[] {
  const n = ROWS;
  const values = randomValues(n, 29);
  const weights = randomValues(n, 30);
  const weightedSumExpected = () => weightedSumRef({ values, weights, n });
  return [
    {
      op: 'reduce',
      kernel: 'weighted sum',
      shape: `n=${n}`,
      bytes: F32_BYTES * (2 * n + 1),
      reference: weightedSumExpected,
      setup: (engine) => {
        const t = { values: upload(engine, 'values', values), weights: upload(engine, 'weights', weights) };
        const out = engine.tensor('bench-out', [1]);
        return {
          run: () => weightedSum(engine, { ...t, out, n }),
          check: () => checkOutput(engine, 'out', out, [weightedSumExpected()], 1e-4, 1e-4),
        };
      },
    },
  ];
}
