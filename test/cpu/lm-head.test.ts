import { describe, it } from 'vitest';
import { lmHeadForwardRef, lmHeadBackwardRef, type LmHeadRefArgs } from '../../kernels/layers/lm-head.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('lm-head reference backward', () => {
  const N = 3;
  const C = 4;
  const V = 6;
  const hidden = Float64Array.from(randomArray(N * C, 11, 1.5));
  const weight = Float64Array.from(randomArray(V * C, 12, 1.5));
  const targets = [2, 0, 5];
  const dLogprobs = Float64Array.from(randomArray(N, 13));
  const dEntropy = Float64Array.from(randomArray(N, 14));

  for (const temperature of [1, 0.7]) {
    for (const withEntropy of [false, true]) {
      it(`matches finite differences (temperature ${temperature}, entropy term ${withEntropy})`, () => {
        const args: LmHeadRefArgs = { hidden, weight, targets, N, C, V, temperature };
        const loss = () => {
          const { logprobs, entropy } = lmHeadForwardRef(args);
          let sum = 0;
          for (let n = 0; n < N; n++) sum += dLogprobs[n] * logprobs[n] + (withEntropy ? dEntropy[n] * entropy[n] : 0);
          return sum;
        };
        const { dHidden, dWeight } = lmHeadBackwardRef({ ...args, dLogprobs, dEntropy: withEntropy ? dEntropy : null });
        expectClose(dHidden, numericGradient(hidden, loss), 1e-8, 1e-6, 'dHidden');
        expectClose(dWeight, numericGradient(weight, loss), 1e-8, 1e-6, 'dWeight');
      });
    }
  }
});
