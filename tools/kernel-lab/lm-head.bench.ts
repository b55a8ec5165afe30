// Bench cases of lm-head for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import type { Engine } from '../../engine/index.ts';
import { lmHeadForward, lmHeadBackward } from '../../kernels/layers/lm-head.ts';
import { lmHeadForwardRef, lmHeadBackwardRef } from '../../kernels/layers/lm-head.ref.ts';
import { MODEL, ROWS, checkOutputs, randomValues, randomIds, upload, type KernelBenchCase } from './bench-inputs.ts';

/** The fused LM head (log-probs and entropies of the targets). FLOPs are its matmuls: the logits (2NVC) forward;
 *  logits again, dHidden and dWeight backward, which gets the forward's entropy and an entropy gradient (PPO).
 *  At the benchmark model's shape unless given another (tools/kernel-lab/at-scale.ts). */
export function lmHeadCases({ N, C, V } = { N: ROWS, C: MODEL.hiddenSize, V: MODEL.vocabSize }): KernelBenchCase[] {
  const hidden = randomValues(N * C, 16);
  const weight = randomValues(V * C, 17, 0.1);
  const targets = randomIds(N, 18, V);
  const dLogprobs = randomValues(N, 19);
  const dEntropy = randomValues(N, 20, 0.01);
  const shape = `N=${N},C=${C},V=${V}`;
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
  const checkForward = (engine: Engine, args: ReturnType<typeof forward>['args']) => {
    const expected = lmHeadForwardRef(reference);
    return checkOutputs(engine, [
      ['logprobs', args.logprobs, expected.logprobs, 1e-4, 1e-4],
      ['entropy', args.entropy, expected.entropy, 1e-4, 1e-4],
      ['lse', args.lse, expected.lse, 1e-4, 1e-4],
    ]);
  };
  return [
    {
      op: 'lm-head',
      kernel: 'lm-head forward',
      shape,
      flops: 2 * N * V * C,
      reference: () => lmHeadForwardRef(reference),
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
      reference: () => lmHeadBackwardRef({ ...reference, dLogprobs, dEntropy }),
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
          check: () => {
            const expected = lmHeadBackwardRef({ ...reference, dLogprobs, dEntropy });
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
