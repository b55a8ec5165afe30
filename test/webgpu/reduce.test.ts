import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { weightedSum, sumOfSquares, sumSquaresVariants } from '../../kernels/util/reduce.ts';
import { weightedSumRef } from '../../kernels/util/reduce.ref.ts';
import { gradNormSquaredRef } from '../../kernels/optim/adamw.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

describe('deterministic reductions', () => {
  for (const n of [1, 300, 5000]) {
    it(`weightedSum over n=${n} (longer inputs, only the first n count)`, async () => {
      const engine = await gpuEngine();
      const values = randomArray(n + 3, n);
      const weights = randomArray(n + 3, n + 1);
      const out = engine.tensor('out', [1]);
      weightedSum(engine, {
        values: engine.tensorFrom('values', [n + 3], values),
        weights: engine.tensorFrom('weights', [n + 3], weights),
        out,
        n,
      });
      expectClose(await engine.read(out), [weightedSumRef({ values, weights, n })], 1e-5, 1e-5, 'weighted sum');
    });
  }

  for (const variant of sumSquaresVariants)
    it(`sumOfSquares (${variant.name}) over several tensors, bit-identical on repeat`, async () => {
      const engine = await gpuEngine();
      engine.knobs.kernelVariants['sum-squares'] = variant.name;
      const data = [randomArray(4, 1), randomArray(300_000, 2), randomArray(1028, 3)];
      const tensors = data.map((d, i) => engine.tensorFrom(`x${i}`, [d.length], d));
      const out = engine.tensor('out', [1]);
      sumOfSquares(engine, { tensors, out });
      const first = await engine.read(out);
      expectClose(first, [gradNormSquaredRef(data)], 0, 1e-5, 'sum of squares');
      sumOfSquares(engine, { tensors, out });
      expect(await engine.read(out)).toEqual(first);
      delete engine.knobs.kernelVariants['sum-squares'];
    });
});
