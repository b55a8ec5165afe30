// The AdamW8bit kernel against its float64 port of bitsandbytes' kernel (kernels/optim/adamw8bit.ref.ts), step by
// step from the same state: each step the reference starts from the codes, scales and weights the kernel left.
// Bounds: the kernel computes in float32 (a dequantized moment takes 3 roundings and a division ≤ 2.5 ulp in WGSL),
// so the block scales agree to 1e-6 relative, the weights to 2^-22 of |p| plus 1e-5 of the step, and every code
// equals the reference's except where the moment over its scale lies within 1e-5 of a decision midpoint (there
// either neighbour is bitsandbytes' answer up to float32 rounding), where the two may differ by one index.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { randomArray } from '../support/arrays.ts';
import { gradNormSquared } from '../../kernels/optim/adamw.ts';
import { adamw8bitSizes, adamw8bitStep } from '../../kernels/optim/adamw8bit.ts';
import { adamw8bitStepRef } from '../../kernels/optim/adamw8bit.ref.ts';
import { createDynamicMap } from '../../engine/dynamic-map.ts';
import { Arena } from '../../engine/index.ts';
import { AdamWOptimizer } from '../../ppo/training/adamw-optimizer.ts';
import { decodeOptimizerState, encodeOptimizerState } from '../../ppo/training/optimizer-state.ts';

const code1 = createDynamicMap(true);
const code2 = createDynamicMap(false);

const unpack = (words: Uint32Array, n: number) =>
  Uint8Array.from({ length: n }, (_, i) => (words[i >> 2] >>> (8 * (i & 3))) & 0xff);

/** Gradients whose scale changes by block (so each block's absmax differs), with one block of zeros and some zero
 *  elements. */
function gradients(n: number, seed: number): Float32Array {
  const g = randomArray(n, seed, 0.2);
  for (let i = 0; i < n; i++) {
    const block = Math.floor(i / 256);
    g[i] *= block === 2 ? 0 : 10 ** ((block % 5) - 3);
    if (i % 97 === 0) g[i] = 0;
  }
  return g;
}

describe('AdamW8bit (bitsandbytes blockwise 8-bit moments)', () => {
  // float32 values, as bitsandbytes' kernel takes them (1 − β2 from a float64 β2 = 0.999 is 1.3e-5 away).
  const f = Math.fround;
  const hyper = { lr: f(1e-2), beta1: f(0.9), beta2: f(0.999), eps: f(1e-8), weightDecay: f(0.01) };
  for (const { what, n, maxNorm, gradScale } of [
    { what: 'a partial last block, clipping active', n: 4133, maxNorm: 0.5, gradScale: 1 },
    { what: 'whole blocks, scaled grads, no clipping', n: 4096 + 1024, maxNorm: 0, gradScale: 0.25 },
  ]) {
    it(`equals the float64 port of bitsandbytes' update over 5 steps (${what})`, async () => {
      const engine = await gpuEngine();
      const padded = Math.ceil(n / 4) * 4;
      const { words, blocks } = adamw8bitSizes(n);
      const start = new Float32Array(padded);
      start.set(randomArray(n, 5));
      const params = engine.tensorFrom('params', [padded], start);
      const grads = engine.tensor('grads', [padded]);
      const state1 = engine.tensor('state1', [words], 'u32');
      const state2 = engine.tensor('state2', [words], 'u32');
      const absmax1 = engine.tensor('absmax1', [blocks]);
      const absmax2 = engine.tensor('absmax2', [blocks]);
      const qmap = engine.tensorFrom('qmap', [512], [...code1, ...code2]);
      const normSquared = engine.tensor('normSquared', [1]);
      let nearMidpoint = 0;
      for (let step = 1; step <= 5; step++) {
        const before = {
          params: Float64Array.from((await engine.read(params)).subarray(0, n)),
          state1: unpack(await engine.read(state1), n),
          state2: unpack(await engine.read(state2), n),
          absmax1: Float64Array.from(await engine.read(absmax1)),
          absmax2: Float64Array.from(await engine.read(absmax2)),
        };
        const g = new Float32Array(padded);
        g.set(gradients(n, 100 + step));
        engine.upload(grads, g);
        gradNormSquared(engine, { grads: [grads], normSquared });
        const args = { ...hyper, maxNorm, gradScale, step };
        adamw8bitStep(engine, {
          params,
          grads,
          state1,
          state2,
          absmax1,
          absmax2,
          qmap,
          normSquared,
          count: n,
          ...args,
        });
        const [norm] = await engine.read(normSquared);
        const ref = { ...before, params: Float64Array.from(before.params) };
        const { m, v } = adamw8bitStepRef({ ...ref, grads: g, code1, code2, normSquared: norm, ...args });
        const got = {
          params: await engine.read(params),
          state1: unpack(await engine.read(state1), n),
          state2: unpack(await engine.read(state2), n),
          absmax1: await engine.read(absmax1),
          absmax2: await engine.read(absmax2),
        };
        for (let b = 0; b < blocks; b++) {
          expect(Math.abs(got.absmax1[b] - ref.absmax1[b]), `absmax1[${b}] step ${step}`).toBeLessThanOrEqual(
            1e-6 * ref.absmax1[b],
          );
          expect(Math.abs(got.absmax2[b] - ref.absmax2[b]), `absmax2[${b}] step ${step}`).toBeLessThanOrEqual(
            1e-6 * ref.absmax2[b],
          );
        }
        for (let i = 0; i < n; i++) {
          const bound = 2 ** -22 * Math.abs(ref.params[i]) + 1e-5 * Math.abs(ref.params[i] - before.params[i]);
          if (!(Math.abs(got.params[i] - ref.params[i]) <= bound))
            expect.fail(`params[${i}] step ${step}: ${got.params[i]} vs ${ref.params[i]} (bound ${bound})`);
          const block = Math.floor(i / 256);
          for (const [which, code, x, mine, theirs] of [
            ['state1', code1, m[i] / ref.absmax1[block], got.state1[i], ref.state1[i]],
            ['state2', code2, v[i] / ref.absmax2[block], got.state2[i], ref.state2[i]],
          ] as const) {
            if (mine === theirs) continue;
            const midpoint = (code[mine] + code[theirs]) / 2;
            if (Math.abs(mine - theirs) === 1 && Math.abs(x - midpoint) <= 1e-5 * Math.abs(x)) nearMidpoint++;
            else expect.fail(`${which}[${i}] step ${step}: code ${mine}, reference ${theirs} (x = ${x})`);
          }
        }
        expect(got.params.subarray(n)).toEqual(start.subarray(n));
      }
      // Near-midpoint disagreements are float32 rounding, so rare; many would mean a systematic difference.
      expect(nearMidpoint).toBeLessThan(0.001 * n * 10);
    });
  }

  it('the first step from zero state: a zero block stores bitsandbytes codes 255 and 0, the others move', async () => {
    const engine = await gpuEngine();
    const n = 768;
    const { words, blocks } = adamw8bitSizes(n);
    const g = randomArray(n, 3, 0.1);
    g.fill(0, 256, 512);
    const params = engine.tensorFrom('params', [n], new Float32Array(n).fill(1));
    const grads = engine.tensorFrom('grads', [n], g);
    const state1 = engine.tensor('state1', [words], 'u32');
    const state2 = engine.tensor('state2', [words], 'u32');
    const absmax1 = engine.tensor('absmax1', [blocks]);
    const absmax2 = engine.tensor('absmax2', [blocks]);
    const qmap = engine.tensorFrom('qmap', [512], [...code1, ...code2]);
    const normSquared = engine.tensor('normSquared', [1]);
    gradNormSquared(engine, { grads: [grads], normSquared });
    adamw8bitStep(engine, {
      ...{ params, grads, state1, state2, absmax1, absmax2, qmap, normSquared, count: n },
      ...{ ...hyper, maxNorm: 0, step: 1 },
    });
    const s1 = unpack(await engine.read(state1), n);
    const s2 = unpack(await engine.read(state2), n);
    expect([...(await engine.read(absmax1))].map((a) => a > 0)).toEqual([true, false, true]);
    expect(new Set(s1.subarray(256, 512))).toEqual(new Set([255]));
    expect(new Set(s2.subarray(256, 512))).toEqual(new Set([0]));
    // Adam's first step moves every weight with a gradient by about lr (m/√v = ±1 after bias correction).
    const p = await engine.read(params);
    expect(Math.abs(p[0] - (1 - hyper.lr * Math.sign(g[0])) * (1 - hyper.lr * hyper.weightDecay))).toBeLessThan(1e-5);
    expect(p[300]).toBeCloseTo(1 - hyper.lr * hyper.weightDecay, 7);
  });

  it('AdamWOptimizer: 8-bit state for tensors of ≥ 4096 values, saved and reloaded bit for bit', async () => {
    const engine = await gpuEngine();
    const entries = [
      { name: 'big', shape: [5, 1000] },
      { name: 'norm', shape: [300] },
    ];
    const layout = Arena.plan(engine, entries);
    const config = { lr: 1e-2, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay: 0.01, maxGradNorm: 1 };
    const make = async (label: string, from: Arena | null) => {
      const params = new Arena(engine, label, layout);
      for (const { name } of entries)
        engine.upload(
          params.get(name),
          from ? await engine.read(from.get(name)) : randomArray(params.get(name).size, 9),
        );
      return new AdamWOptimizer(engine, params, { ...config, optimizer: 'AdamW8bit' });
    };
    const stepWith = async (optimizer: AdamWOptimizer, seed: number) => {
      for (const { name } of entries) {
        const g = optimizer.grads.get(name);
        engine.upload(g, randomArray(g.size, seed + g.size, 0.1));
      }
      await optimizer.step();
    };
    const first = await make('first', null);
    for (let step = 0; step < 3; step++) await stepWith(first, 10 * step);
    const saved = await first.saveState();
    expect([...(saved.quantized?.keys() ?? [])]).toEqual(['big']);
    expect([...saved.m.keys()]).toEqual(['norm']);
    const bytes = encodeOptimizerState(saved);
    const second = await make('second', first.params);
    second.loadState(decodeOptimizerState(bytes, 'optimizer.safetensors', entries));
    expect(encodeOptimizerState(await second.saveState())).toEqual(bytes);
    for (let step = 3; step < 5; step++) {
      await stepWith(first, 10 * step);
      await stepWith(second, 10 * step);
    }
    for (const { name } of entries)
      expect(await engine.read(second.params.get(name))).toEqual(await engine.read(first.params.get(name)));
    // A run that switched optimizers is told so instead of loading moments of another shape.
    const plain = new AdamWOptimizer(engine, new Arena(engine, 'plain', layout), config);
    expect(() => plain.loadState(saved)).toThrow(/saved by AdamW8bit .* resume with the optimizer/);
  });
});
