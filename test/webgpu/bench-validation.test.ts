// Validate, then time (tools/bench/kernels.ts): a benchmark case whose output is off its reference stops the
// benchmark with one line naming the kernel, its shape, the output and the max error, before anything is timed;
// the real cases of an op pass.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { kernelCases, validateKernels } from '../../tools/bench/kernels.ts';
import { checkOutput, randomValues, upload, type KernelBenchCase } from '../../tools/kernel-lab/bench-inputs.ts';

describe('bench validation', () => {
  it("passes the op's real cases", async () => {
    const engine = await gpuEngine();
    await expect(
      validateKernels(engine, kernelCases(engine, ['rmsnorm', 'swiglu', 'embedding'])),
    ).resolves.toBeUndefined();
  });

  it('stops at a case whose output is off, with the max error', async () => {
    const engine = await gpuEngine();
    const expected = randomValues(64, 3);
    const wrong: KernelBenchCase = {
      op: 'copy',
      kernel: 'copy of half',
      shape: 'n=64',
      setup: (e) => {
        const source = upload(e, 'source', expected);
        const out = e.tensor('bench-out', [64]);
        // Copies only the first 32 values: the rest stay 0.
        return {
          run: () => e.copy(source.view('source-half', 0, [32]), out.view('out-half', 0, [32])),
          check: () => checkOutput(e, 'out', out, expected, 1e-6, 0),
        };
      },
    };
    const largest = Math.max(...Array.from(expected.subarray(32), Math.abs));
    await expect(validateKernels(engine, [wrong])).rejects.toThrow(
      `kernel copy of half n=64: out off by ${largest.toPrecision(3)} (`,
    );
  });
});
