// Kernels at shapes a real model uses (Qwen3-0.6B's hidden 1024, intermediate 3072, heads of 128 over 2,048 tokens,
// its 151,936-word vocabulary, a 4,096-slot decode cache), on the hardware GPU the tier demands: sizes lavapipe cannot
// run in CI time, where tiling, vector loads, vocabulary chunks and workgroup splits meet many workgroups at once.
// The cases past matmul are tools/kernel-lab/at-scale.ts's, which gpu-report validates too.
import { describe, it, expect, afterAll } from 'vitest';
import { realGpuEngine, requireHardwareGpu } from '../support/real-gpu-engine.ts';
import { matmul, matmulVariants, type MatmulLayout } from '../../kernels/matmul/matmul.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';
import { chooseVariant, readKnobs, roundToHalf, type Engine } from '../../engine/index.ts';
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

// WebGPU's default binding, the one browsers give: Qwen3-8B's bf16 gate_up_proj W [24,576, 4,096] (192 MiB) and
// Qwen3-4B's float32 one [19,456, 2,560] (190 MiB, its gradient in a full fine-tune) are above it, so matmul takes
// them in windows of rows (kernels/matmul/matmul.ts weightWindows): y = x·Wᵀ and dx = dy·W by the bf16 weight, and
// dW = dyᵀ·x written a window of rows at a time, for 4 tokens (the float64 reference's products stay ~400M).
describe('matmul by a layer weight above a 128 MiB binding', () => {
  let engine: Engine | null = null;
  afterAll(() => engine?.destroy());
  const BINDING = 128 * 2 ** 20;
  const tokens = 4;
  for (const layout of ['nt', 'nn', 'tn'] as MatmulLayout[]) {
    const [rows, cols] = layout === 'tn' ? [19456, 2560] : [24576, 4096];
    it(`${layout} with W [${rows}, ${cols}] (${layout === 'tn' ? 'its float32 gradient' : 'bf16'}) matches the reference`, async () => {
      engine ??= await requireHardwareGpu({ ...readKnobs(), maxBindingBytes: BINDING });
      expect(engine.maxBindingBytes).toBe(BINDING);
      // nt: y [tokens, rows]; nn: dx [tokens, cols]; tn: dW [rows, cols] from dy [tokens, rows] and x [tokens, cols].
      const [M, N, K] =
        layout === 'nt' ? [tokens, rows, cols] : layout === 'nn' ? [tokens, cols, rows] : [rows, cols, tokens];
      const a = randomArray(M * K, 3);
      const w = randomArray(K * N, 4, layout === 'tn' ? 1 : 0.05);
      const out = engine.tensor('out', [M, N]);
      const b = engine.tensorFrom('w', [K * N], w, layout === 'tn' ? 'f32' : 'bf16');
      expect(Math.max(b.byteLength, out.byteLength)).toBeGreaterThan(BINDING);
      matmul(engine, { a: engine.tensorFrom('a', [M * K], a), b, out, M, N, K, layout });
      const expected = matmulForwardRef({ a, b: layout === 'tn' ? w : roundToHalf('bf16', w), M, N, K, layout });
      expectClose(await engine.read(out), expected, 1e-4, 1e-4, `matmul ${layout}`);
    }, 600_000);
  }
});
