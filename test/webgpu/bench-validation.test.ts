// Validate, then time (tools/bench/kernels.ts): a benchmark case whose output is off its reference stops the
// benchmark with one line naming the kernel, its shape, the output and the max error, before anything is timed;
// the real cases of an op pass. The real-size cases checked on a sample (gpu-report's validate section) pass at a
// small shape, and a wrong value in any sampled row's output fails them with its max error.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { kernelCases, validateKernels } from '../../tools/bench/kernels.ts';
import { checkOutput, randomValues, upload, type KernelBenchCase } from '../../tools/kernel-lab/bench-inputs.ts';
import { atScaleCases } from '../../tools/kernel-lab/at-scale.ts';
import type { Engine, Tensor } from '../../engine/index.ts';

const SMALL = { T: 64, NH: 4, NKV: 2, HS: 16, C: 32, V: 1000, cache: 96 };

/** Adds 0.01 to the odd elements of what `engine` reads from tensors named `prefix`...: every row's second lane, as
 *  a kernel that is off in one lane would write. Returns the undo. */
function corruptReads(engine: Engine, prefix: string): () => void {
  const read = engine.read.bind(engine);
  engine.read = (async (tensor: Tensor) => {
    const values = await read(tensor);
    if (tensor.name.startsWith(prefix)) for (let i = 1; i < values.length; i += 2) values[i] += 0.01;
    return values;
  }) as Engine['read'];
  return () => {
    engine.read = read;
  };
}

describe('bench validation', () => {
  it("passes the op's real cases", async () => {
    const engine = await gpuEngine();
    const cases = kernelCases(engine, ['rmsnorm', 'swiglu', 'embedding']);
    await expect(validateKernels(engine, cases)).resolves.toBe(cases.length);
  });

  it('passes the real-size cases checked on a sample, at a small shape', async () => {
    const engine = await gpuEngine();
    const cases = atScaleCases('sampled', SMALL);
    expect(cases.map((c) => c.kernel)).toEqual([
      'attention forward',
      'attention backward',
      'lm-head forward',
      'lm-head backward',
      'decode attention',
      'sample',
    ]);
    await expect(validateKernels(engine, cases)).resolves.toBe(cases.length);
  });

  // The output each case's sampled check reads, by tensor name.
  const outputs: [string, string, RegExp][] = [
    ['attention forward', 'bench-out', /: (out|lse) off by 0\.0100 /],
    ['attention backward', 'bench-dQkv', /: d[qkv] off by 0\.0100 /],
    ['lm-head forward', 'bench-logprobs', /: logprobs off by 0\.0100 /],
    ['lm-head backward', 'bench-dWeight', /: dWeight off by 0\.0100 /],
    ['decode attention', 'bench-decode-out', /: out off by 0\.0100 /],
  ];
  for (const [kernel, tensor, message] of outputs) {
    it(`a sampled check of ${kernel} catches a wrong lane`, async () => {
      const engine = await gpuEngine();
      const benchCase = atScaleCases('sampled', SMALL).find((c) => c.kernel === kernel)!;
      const restore = corruptReads(engine, tensor);
      try {
        await expect(validateKernels(engine, [benchCase])).rejects.toThrow(message);
      } finally {
        restore();
      }
    });
  }

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
