// Bench cases of lm-head for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import type { Engine } from '../../engine/index.ts';
import { lmHeadForward, lmHeadBackward } from '../../kernels/layers/lm-head.ts';
import { lmHeadForwardRef, lmHeadBackwardRef } from '../../kernels/layers/lm-head.ref.ts';
import { MODEL, ROWS, randomValues, randomIds, upload, type KernelBenchCase } from './bench-inputs.ts';

/** The fused LM head (log-probs and entropies of the targets). FLOPs are its matmuls: the logits (2NVC) forward;
 *  logits again, dHidden and dWeight backward, which gets the forward's entropy and an entropy gradient (PPO). */
export function lmHeadCases(): KernelBenchCase[] {
  const { hiddenSize: C, vocabSize: V } = MODEL;
  const N = ROWS;
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
  return [
    {
      op: 'lm-head',
      kernel: 'lm-head forward',
      shape,
      flops: 2 * N * V * C,
      reference: () => lmHeadForwardRef(reference),
      setup: (engine) => forward(engine).run,
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
        return () => lmHeadBackward(engine, { ...args, ...grads });
      },
    },
  ];
}
