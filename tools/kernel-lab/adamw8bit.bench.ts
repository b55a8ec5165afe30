// Bench case of adamw8bit for `node tools/bench.js kernels` (tools/bench/kernels.ts runs it).
import type { Engine } from '../../engine/index.ts';
import { gradNormSquared } from '../../kernels/optim/adamw.ts';
import { adamw8bitSizes, adamw8bitStep } from '../../kernels/optim/adamw8bit.ts';
import { adamw8bitStepRef } from '../../kernels/optim/adamw8bit.ref.ts';
import { gradNormSquaredRef } from '../../kernels/optim/adamw.ref.ts';
import { createDynamicMap } from '../../engine/dynamic-map.ts';
import { F32_BYTES, checkOutputs, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** AdamW8bit's first step over one tensor of 2^20 parameters from zero state: params and grads read, params
 *  written, both moments' codes (a byte each) and block scales read and written. */
export function adamw8bitCases(): KernelBenchCase[] {
  const n = 1 << 20;
  const { words, blocks } = adamw8bitSizes(n);
  const code1 = createDynamicMap(true);
  const code2 = createDynamicMap(false);
  // float32 hyperparameters, as the kernel sees them.
  const f = Math.fround;
  const hyper = {
    maxNorm: 1,
    lr: f(1e-3),
    beta1: f(0.9),
    beta2: f(0.999),
    eps: f(1e-8),
    weightDecay: f(0.01),
    step: 1,
  };
  let inputs: { grads: Float32Array; params: Float32Array; normSquared: number } | null = null;
  const made = () => {
    if (!inputs) {
      const grads = randomValues(n, 35, 1e-3);
      inputs = { grads, params: randomValues(n, 36, 0.1), normSquared: gradNormSquaredRef([grads]) };
    }
    return inputs;
  };
  const stepped = () => {
    const { params, grads, normSquared } = made();
    const after = {
      params: Float64Array.from(params),
      state1: new Uint8Array(n),
      state2: new Uint8Array(n),
      absmax1: new Float64Array(blocks),
      absmax2: new Float64Array(blocks),
    };
    adamw8bitStepRef({ ...after, grads, code1, code2, normSquared, ...hyper });
    return after;
  };
  return [
    {
      op: 'adamw8bit',
      kernel: 'adamw8bit step',
      shape: `n=${n}`,
      bytes: F32_BYTES * 3 * n + 2 * 2 * n + 2 * 2 * F32_BYTES * blocks,
      reference: stepped,
      setup: (engine: Engine) => {
        const grads = upload(engine, 'grads', made().grads);
        const normSquared = engine.tensor('bench-normSquared', [1]);
        gradNormSquared(engine, { grads: [grads], normSquared });
        const t = {
          params: upload(engine, 'params', made().params),
          grads,
          normSquared,
          state1: engine.tensor('bench-state1', [words], 'u32'),
          state2: engine.tensor('bench-state2', [words], 'u32'),
          absmax1: engine.tensor('bench-absmax1', [blocks]),
          absmax2: engine.tensor('bench-absmax2', [blocks]),
          qmap: engine.tensorFrom('bench-qmap', [512], [...code1, ...code2]),
        };
        return {
          run: () => adamw8bitStep(engine, { ...t, count: n, ...hyper }),
          // Bounds of test/webgpu/adamw8bit.test.ts (the step moves each weight by about lr).
          check: () => {
            const expected = stepped();
            return checkOutputs(engine, [
              ['params', t.params, expected.params, 1e-5 * hyper.lr, 2 ** -22],
              ['absmax1', t.absmax1, expected.absmax1, 0, 1e-6],
              ['absmax2', t.absmax2, expected.absmax2, 0, 1e-6],
            ]);
          },
        };
      },
    },
  ];
}
