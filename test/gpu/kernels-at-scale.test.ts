// Kernels at shapes a real model uses (Qwen3-0.6B's hidden 1024, intermediate 3072, heads of 128 over 2,048 tokens,
// its 151,936-word vocabulary, a 4,096-slot decode cache), on the hardware GPU the tier demands: sizes lavapipe cannot
// run in CI time, where tiling, vector loads, vocabulary chunks and workgroup splits meet many workgroups at once.
// The cases past matmul are tools/kernel-lab/at-scale.ts's, which gpu-report validates too.
import { describe, it, expect } from 'vitest';
import { realGpuEngine } from '../support/real-gpu-engine.ts';
import { matmul, matmulVariants, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';
import { chooseVariant, readKnobs } from '../../engine/index.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { atScaleCases } from '../../tools/kernel-lab/at-scale.ts';

describe('real GPU', () => {
  it('is a hardware adapter and the matmul choice is a GPU variant', async () => {
    const engine = await realGpuEngine();
    expect(engine.caps.softwareAdapter).toBe(false);
    expect(chooseVariant('matmul', matmulVariants, engine.caps, readKnobs({})).name).not.toBe('cpu');
  });

  for (const layout of ['nn', 'nt', 'tn'] as MatmulLayout[]) {
    it(`matmul ${layout} at M=512, N=3072, K=1024 matches the reference`, async () => {
      const engine = await realGpuEngine();
      const [M, N, K] = [512, 3072, 1024];
      const a = randomArray(M * K, 1);
      const b = randomArray(K * N, 2);
      const out = engine.tensor('out', [M, N]);
      matmul(engine, {
        a: engine.tensorFrom('a', [M * K], a),
        b: engine.tensorFrom('b', [K * N], b),
        out,
        M,
        N,
        K,
        layout,
      });
      expectClose(await engine.read(out), matmulForwardRef({ a, b, M, N, K, layout }), 1e-4, 1e-4, `matmul ${layout}`);
    }, 300_000);
  }

  for (const c of atScaleCases()) {
    it(`${c.kernel} at ${c.shape} matches its reference`, async () => {
      const engine = await realGpuEngine();
      const { run, check } = c.setup(engine);
      run();
      const result = await check();
      expect(
        result.violation,
        `${result.output} off by ${result.maxAbsError.toPrecision(3)} (${result.tolerance})`,
      ).toBeLessThanOrEqual(1);
    }, 600_000);
  }
});
