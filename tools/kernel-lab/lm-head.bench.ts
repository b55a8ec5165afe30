// Bench cases of lm-head for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import type { Engine } from '../../engine/index.ts';
import { lmHeadForward, lmHeadBackward } from '../../kernels/layers/lm-head.ts';
import { lmHeadForwardRef, lmHeadBackwardRef, lmHeadBackwardAtRef } from '../../kernels/layers/lm-head.ref.ts';
import {
  F32_BYTES,
  MODEL,
  ROWS,
  checkOutputs,
  checkRows,
  checkValues,
  randomValues,
  randomIds,
  sampleIndices,
  upload,
  worstCheck,
  type KernelBenchCase,
  type KernelCheck,
} from './bench-inputs.ts';

/** Weight rows in WebGPU's default maxBufferSize (256 MiB): where an arena splits the head, so a sample takes the
 *  rows either side. */
const DEFAULT_BUFFER_BYTES = 256 * 2 ** 20;

/** The fused LM head (log-probs and entropies of the targets). FLOPs are its matmuls: the logits (2NVC) forward;
 *  logits again, dHidden and dWeight backward, which gets the forward's entropy and an entropy gradient (PPO).
 *  At the benchmark model's shape unless given another (tools/kernel-lab/at-scale.ts), which may check a sample: a
 *  row's reference is O(V·C), 155M products at Qwen's head. */
export function lmHeadCases(
  { N, C, V } = { N: ROWS, C: MODEL.hiddenSize, V: MODEL.vocabSize },
  kernelCheck: KernelCheck = 'full',
): KernelBenchCase[] {
  const hidden = randomValues(N * C, 16);
  const weight = randomValues(V * C, 17, 0.1);
  const targets = randomIds(N, 18, V);
  const dLogprobs = randomValues(N, 19);
  const dEntropy = randomValues(N, 20, 0.01);
  const shape = `N=${N},C=${C},V=${V}`;
  // The weight is one buffer here (an arena would split it; the engine's split is checked by test/webgpu/buffer-split).
  const fits = (engine: Engine) => V * C * F32_BYTES <= engine.caps.maxBufferSize;
  const bufferRows = Math.floor(DEFAULT_BUFFER_BYTES / (C * F32_BYTES));
  const sampled = {
    rows: sampleIndices(N, 4, 25),
    gradientRows: sampleIndices(N, 2, 26),
    vocabRows: sampleIndices(V, 32, 27, [bufferRows - 1, bufferRows]),
  };
  const forward = (engine: Engine) => {
    const args = {
      hidden: upload(engine, 'hidden', hidden),
      weight: upload(engine, 'weight', weight),
      targets: engine.tensorFrom('bench-targets', [N], targets, 'u32'),
      N,
      C,
      V,
      temperature: 1,
      logprobs: engine.tensor('bench-logprobs', [N]),
      entropy: engine.tensor('bench-entropy', [N]),
      lse: engine.tensor('bench-lse', [N]),
    };
    return { args, run: () => lmHeadForward(engine, args) };
  };
  const reference = { hidden, weight, targets, N, C, V, temperature: 1 };
  const checkForward = async (engine: Engine, args: ReturnType<typeof forward>['args']) => {
    if (kernelCheck === 'sampled') {
      const expected = lmHeadForwardRef(reference, sampled.rows);
      const checks = [];
      for (const output of ['logprobs', 'entropy', 'lse'] as const) {
        const got = await engine.read(args[output]);
        const at = (values: ArrayLike<number>) => sampled.rows.map((n) => values[n]);
        checks.push(checkValues(output, at(got), at(expected[output]), 1e-4, 1e-4));
      }
      return worstCheck(checks);
    }
    const expected = lmHeadForwardExpected();
    return checkOutputs(engine, [
      ['logprobs', args.logprobs, expected.logprobs, 1e-4, 1e-4],
      ['entropy', args.entropy, expected.entropy, 1e-4, 1e-4],
      ['lse', args.lse, expected.lse, 1e-4, 1e-4],
    ]);
  };
  const lmHeadForwardExpected = () => lmHeadForwardRef(reference);
  const lmHeadBackwardExpected = () => lmHeadBackwardRef({ ...reference, dLogprobs, dEntropy });
  return [
    {
      op: 'lm-head',
      kernel: 'lm-head forward',
      shape,
      flops: 2 * N * V * C,
      reference: lmHeadForwardExpected,
      runsOn: fits,
      setup: (engine) => {
        const { args, run } = forward(engine);
        return { run, check: () => checkForward(engine, args) };
      },
    },
    {
      op: 'lm-head',
      kernel: 'lm-head backward',
      shape,
      flops: 6 * N * V * C,
      reference: lmHeadBackwardExpected,
      runsOn: fits,
      setup: (engine) => {
        const { args, run } = forward(engine);
        run();
        const grads = {
          dLogprobs: upload(engine, 'dLogprobs', dLogprobs),
          dEntropy: upload(engine, 'dEntropy', dEntropy),
          dHidden: engine.tensor('bench-dHidden', [N * C]),
          dWeight: engine.tensor('bench-dWeight', [V * C]),
        };
        // One run from a zeroed dWeight, which is added to; dHidden is written.
        return {
          run: () => lmHeadBackward(engine, { ...args, ...grads }),
          check: async () => {
            if (kernelCheck === 'sampled') {
              const expected = lmHeadBackwardAtRef(
                {
                  ...reference,
                  dLogprobs,
                  dEntropy,
                  lse: await engine.read(args.lse),
                  entropy: await engine.read(args.entropy),
                },
                { rows: sampled.gradientRows, vocabRows: sampled.vocabRows },
              );
              // dWeight row by row: the whole is 622 MB at Qwen's head.
              const dWeightRows = [];
              for (const v of sampled.vocabRows)
                dWeightRows.push(await engine.read(grads.dWeight.view(`bench-dWeight[${v}]`, v * C, [C])));
              return worstCheck([
                checkRows(
                  'dHidden',
                  await engine.read(grads.dHidden),
                  sampled.gradientRows.map((n) => n * C),
                  expected.dHidden,
                  1e-4,
                  1e-3,
                ),
                checkRows(
                  'dWeight',
                  dWeightRows.flatMap((row) => Array.from(row)),
                  sampled.vocabRows.map((_, i) => i * C),
                  expected.dWeight,
                  1e-4,
                  1e-3,
                ),
              ]);
            }
            const expected = lmHeadBackwardExpected();
            return checkOutputs(engine, [
              ['dHidden', grads.dHidden, expected.dHidden, 1e-4, 1e-3],
              ['dWeight', grads.dWeight, expected.dWeight, 1e-4, 1e-3],
            ]);
          },
        };
      },
    },
  ];
}
