// Bench cases of adamw for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import type { Engine } from '../../engine/index.ts';
import { adamwStep, gradNormSquared } from '../../kernels/optim/adamw.ts';
import { adamwStepRef, gradNormSquaredRef } from '../../kernels/optim/adamw.ref.ts';
import { F32_BYTES, checkOutput, checkOutputs, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** The optimizer step over one arena segment of 2^20 parameters (the tiny model has about 0.9M): the global
 *  gradient norm, then AdamW with clipping (params, m, v read and written, grads read). */
export function adamwCases(): KernelBenchCase[] {
  const n = 1 << 20;
  // 4M seeded values take seconds on a CPU: made when a case first runs, not when the list is built (a run of
  // other ops' cases, `--only=rmsnorm`, never pays for them).
  let inputs: {
    grads: Float32Array;
    params: Float64Array;
    m: Float64Array;
    v: Float64Array;
    normSquared: number;
  } | null = null;
  const made = () => {
    if (!inputs) {
      const grads = randomValues(n, 25, 1e-3);
      inputs = {
        grads,
        params: Float64Array.from(randomValues(n, 26, 0.1)),
        m: Float64Array.from(randomValues(n, 27, 1e-3)),
        v: Float64Array.from(randomValues(n, 28, 1e-3), (x) => x * x),
        normSquared: gradNormSquaredRef([grads]),
      };
    }
    return inputs;
  };
  const hyper = { maxNorm: 1, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.01, step: 1 };
  const shape = `n=${n}`;
  // The reference updates params, m and v in place: each call gets copies, so the inputs stay the uploaded ones.
  const stepped = () => {
    const { params, m, v, grads, normSquared } = made();
    const after = { params: params.slice(), m: m.slice(), v: v.slice() };
    adamwStepRef({ ...after, grads, normSquared, ...hyper });
    return after;
  };
  const setupGrads = (engine: Engine) => {
    const gradsTensor = upload(engine, 'grads', made().grads);
    const normSquaredTensor = engine.tensor('bench-normSquared', [1]);
    gradNormSquared(engine, { grads: [gradsTensor], normSquared: normSquaredTensor });
    return { grads: gradsTensor, normSquared: normSquaredTensor };
  };
  return [
    {
      op: 'reduce',
      kernel: 'grad norm',
      shape,
      bytes: F32_BYTES * (n + 1),
      reference: () => gradNormSquaredRef([made().grads]),
      setup: (engine) => {
        const t = setupGrads(engine);
        // setupGrads ran it once already; the check reads that run's sum.
        return {
          run: () => gradNormSquared(engine, { grads: [t.grads], normSquared: t.normSquared }),
          check: () => checkOutput(engine, 'normSquared', t.normSquared, [made().normSquared], 1e-9, 1e-4),
        };
      },
    },
    {
      op: 'adamw',
      kernel: 'adamw step',
      shape,
      bytes: F32_BYTES * (7 * n + 1),
      reference: stepped,
      setup: (engine) => {
        const { params, m, v } = made();
        const t = {
          ...setupGrads(engine),
          params: upload(engine, 'params', Float32Array.from(params)),
          m: upload(engine, 'm', Float32Array.from(m)),
          v: upload(engine, 'v', Float32Array.from(v)),
        };
        return {
          run: () => adamwStep(engine, { ...t, ...hyper }),
          check: () => {
            const expected = stepped();
            return checkOutputs(engine, [
              ['params', t.params, expected.params, 1e-7, 1e-5],
              ['m', t.m, expected.m, 1e-9, 1e-5],
              ['v', t.v, expected.v, 1e-12, 1e-5],
            ]);
          },
        };
      },
    },
  ];
}
