import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { valueHeadForward, valueHeadBackward, valueHeadVariants } from '../../kernels/layers/value-head.ts';
import { valueHeadForwardRef, valueHeadBackwardRef } from '../../kernels/layers/value-head.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

describe('value head', () => {
  // C = 7 runs the scalar shader, the others vec4; N = 1 and N = 37 leave backward row slices uneven; N = 70 is
  // more than one workgroup of lane-per-row rows.
  for (const variant of valueHeadVariants)
    for (const [N, C] of [
      [1, 8],
      [37, 12],
      [5, 7],
      [70, 200],
    ]) {
      it(`${variant.name}: forward and backward match the reference (N=${N}, C=${C})`, async () => {
        const engine = await gpuEngine();
        engine.knobs.kernelVariants['value-head'] = variant.name;
        const hidden = randomArray(N * C, N * 1000 + C);
        const weight = randomArray(C, 2);
        const bias = [0.25];
        const dValues = randomArray(N, 3);
        const dWeightBefore = randomArray(C, 4);
        const dBiasBefore = [-0.5];
        const gpuHidden = engine.tensorFrom('hidden', [N, C], hidden);
        const gpuWeight = engine.tensorFrom('weight', [C], weight);
        const values = engine.tensor('values', [N]);
        valueHeadForward(engine, {
          hidden: gpuHidden,
          weight: gpuWeight,
          bias: engine.tensorFrom('bias', [1], bias),
          values,
          N,
          C,
        });
        expectClose(
          await engine.read(values),
          valueHeadForwardRef({ hidden, weight, bias, N, C }),
          1e-5,
          1e-5,
          'values',
        );

        const dHidden = engine.tensorFrom('dHidden', [N, C], randomArray(N * C, 5));
        const dWeight = engine.tensorFrom('dWeight', [C], dWeightBefore);
        const dBias = engine.tensorFrom('dBias', [1], dBiasBefore);
        valueHeadBackward(engine, {
          hidden: gpuHidden,
          weight: gpuWeight,
          dValues: engine.tensorFrom('dValues', [N], dValues),
          dHidden,
          dWeight,
          dBias,
          N,
          C,
        });
        const expected = valueHeadBackwardRef({ hidden, weight, dValues, N, C });
        expectClose(await engine.read(dHidden), expected.dHidden, 1e-6, 1e-5, 'dHidden');
        expectClose(
          await engine.read(dWeight),
          expected.dWeight.map((g, c) => g + dWeightBefore[c]),
          1e-5,
          1e-5,
          'dWeight',
        );
        expectClose(await engine.read(dBias), [expected.dBias[0] + dBiasBefore[0]], 1e-5, 1e-5, 'dBias');
        delete engine.knobs.kernelVariants['value-head'];
      });
    }
});
