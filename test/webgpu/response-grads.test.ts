import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { scatterResponseGradsGpu } from '../../kernels/ppo/response-grads.ts';
import { scatterResponseGradsRef } from '../../kernels/ppo/response-grads.ref.ts';

describe('response-grads kernel', () => {
  for (const [B, S, T] of [
    [1, 2, 1],
    [3, 11, 4],
    [5, 40, 39],
  ]) {
    it(`scatters [B=${B}, T=${T}, 2] into [B, S=${S}]`, async () => {
      const engine = await gpuEngine();
      // Stale values in the outputs must be overwritten, zeros included.
      const grads = randomArray(2 * B * T, B + S + T);
      const dLogprobs = engine.tensorFrom('dLogprobs', [B * S], randomArray(B * S, 9));
      const dEntropy = engine.tensorFrom('dEntropy', [B * S], randomArray(B * S, 10));
      scatterResponseGradsGpu(engine, {
        grads: engine.tensorFrom('grads', [B * T * 2], grads),
        dLogprobs,
        dEntropy,
        B,
        S,
        T,
      });
      const ref = scatterResponseGradsRef(grads, B, S, T);
      expectClose(await engine.read(dLogprobs), ref.dLogprobs, 1e-30, 0, 'dLogprobs');
      expectClose(await engine.read(dEntropy), ref.dEntropy, 1e-30, 0, 'dEntropy');
    });
  }
});
