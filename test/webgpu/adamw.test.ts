import { describe, it, expect } from 'vitest';
import { Arena } from '../../engine/index.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { gpuEngine } from '../support/gpu-engine.ts';
import { adamwStep, gradNormSquared } from '../../kernels/optim/adamw.ts';
import { adamwStepRef, gradNormSquaredRef } from '../../kernels/optim/adamw.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

describe('AdamW with global-norm clipping', () => {
  const segmentSizes = [1000, 68];
  const hyper = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };

  const cases = [
    { what: 'clipping active', maxNorm: 0.5, gradScale: 1 },
    { what: 'clipping inactive', maxNorm: 1e6, gradScale: 1 },
    { what: 'clipping disabled, scaled grads', maxNorm: 0, gradScale: 0.25 },
    { what: 'clipping active, scaled grads', maxNorm: 1, gradScale: 0.5 },
    { what: "weight decay after the step, bitsandbytes' order", maxNorm: 1, gradScale: 1, decay: 'after' as const },
  ];
  for (const { what, maxNorm, gradScale, decay } of cases) {
    it(`matches torch.optim.AdamW over several steps (${what})`, async () => {
      const engine = await gpuEngine();
      const params = segmentSizes.map((n, s) => Float64Array.from(randomArray(n, 100 + s)));
      const m = segmentSizes.map((n) => new Float64Array(n));
      const v = segmentSizes.map((n) => new Float64Array(n));
      const gpuParams = segmentSizes.map((n, s) => engine.tensorFrom(`params#${s}`, [n], params[s]));
      const gpuGrads = segmentSizes.map((n, s) => engine.tensor(`grads#${s}`, [n]));
      const gpuM = segmentSizes.map((n, s) => engine.tensor(`m#${s}`, [n]));
      const gpuV = segmentSizes.map((n, s) => engine.tensor(`v#${s}`, [n]));
      const normSquared = engine.tensor('normSquared', [1]);
      for (let step = 1; step <= 4; step++) {
        const grads = segmentSizes.map((n, s) => randomArray(n, 1000 * step + s, 0.2));
        grads.forEach((g, s) => engine.upload(gpuGrads[s], g));
        gradNormSquared(engine, { grads: gpuGrads, normSquared });
        for (let s = 0; s < segmentSizes.length; s++) {
          adamwStep(engine, {
            params: gpuParams[s],
            grads: gpuGrads[s],
            m: gpuM[s],
            v: gpuV[s],
            normSquared,
            maxNorm,
            ...hyper,
            step,
            gradScale,
            decay,
          });
        }
        const expectedNormSquared = gradNormSquaredRef(grads);
        expectClose(await engine.read(normSquared), [expectedNormSquared], 0, 1e-5, `normSquared at step ${step}`);
        for (let s = 0; s < segmentSizes.length; s++) {
          adamwStepRef({
            params: params[s],
            grads: grads[s],
            m: m[s],
            v: v[s],
            normSquared: expectedNormSquared,
            maxNorm,
            ...hyper,
            step,
            gradScale,
            decay,
          });
        }
      }
      for (let s = 0; s < segmentSizes.length; s++) {
        expectClose(await engine.read(gpuParams[s]), params[s], 1e-6, 1e-5, `params#${s}`);
        expectClose(await engine.read(gpuM[s]), m[s], 1e-7, 1e-4, `m#${s}`);
        expectClose(await engine.read(gpuV[s]), v[s], 1e-9, 1e-4, `v#${s}`);
      }
    });
  }

  for (const bad of [NaN, Infinity]) {
    it(
      `skips the update when a gradient is ${bad}: params and moments keep their values, as the reference ` + `does`,
      async () => {
        const engine = await gpuEngine();
        const n = 256;
        const start = randomArray(n, 11);
        const moment = randomArray(n, 12, 0.1);
        const grads = randomArray(n, 13, 0.2);
        grads[77] = bad;
        const params = engine.tensorFrom('params', [n], start);
        const m = engine.tensorFrom('m', [n], moment);
        const v = engine.tensorFrom('v', [n], moment.map(Math.abs));
        const gpuGrads = engine.tensorFrom('grads', [n], grads);
        const normSquared = engine.tensor('normSquared', [1]);
        gradNormSquared(engine, { grads: [gpuGrads], normSquared });
        adamwStep(engine, { params, grads: gpuGrads, m, v, normSquared, maxNorm: 1, ...hyper, step: 3 });
        const [norm] = await engine.read(normSquared);
        expect(Number.isFinite(norm)).toBe(false);
        expect(await engine.read(params)).toEqual(start);
        expect(await engine.read(m)).toEqual(moment);
        expect(await engine.read(v)).toEqual(moment.map(Math.abs));
        const ref = {
          params: Float64Array.from(start),
          m: Float64Array.from(moment),
          v: Float64Array.from(moment.map(Math.abs)),
        };
        adamwStepRef({ ...ref, grads, normSquared: norm, maxNorm: 1, ...hyper, step: 3 });
        expect(ref.params).toEqual(Float64Array.from(start));
      },
    );
  }

  it("reset: the next step is a fresh optimizer's first (moments and bias correction start over)", async () => {
    const engine = await gpuEngine();
    const layout = Arena.plan(engine, [{ name: 'w', shape: [256] }]);
    const n = layout.segments[0].size;
    const start = randomArray(n, 7);
    const stepWith = async (optimizer: AdamWOptimizer, grads: Float32Array) => {
      engine.upload(optimizer.grads.segments[0], grads);
      await optimizer.step(1e-2);
      return engine.read(optimizer.params.segments[0]);
    };
    const config = { lr: 1e-2, betas: [0.9, 0.95] as [number, number], eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 };
    const used = new AdamWOptimizer(engine, new Arena(engine, 'used', layout), config);
    engine.upload(used.params.segments[0], start);
    for (let step = 0; step < 3; step++) await stepWith(used, randomArray(n, 50 + step, 0.2));
    const fresh = new AdamWOptimizer(engine, new Arena(engine, 'fresh', layout), config);
    engine.upload(fresh.params.segments[0], await engine.read(used.params.segments[0]));
    used.reset();
    const grads = randomArray(n, 99, 0.2);
    expect(await stepWith(used, grads)).toEqual(await stepWith(fresh, grads));
    expect(used.stepCount).toBe(1);
  });
});
