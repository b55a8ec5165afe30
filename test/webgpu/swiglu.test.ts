import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { swigluForward, swigluBackward } from '../../kernels/layers/swiglu.ts';
import { swigluForwardRef, swigluBackwardRef } from '../../kernels/layers/swiglu.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

describe('swiglu kernel', () => {
  for (const [rows, I] of [
    [1, 4],
    [7, 12],
    [33, 130],
    [5, 3],
  ]) {
    it(`forward and backward match the reference for rows=${rows}, I=${I}`, async () => {
      const engine = await gpuEngine();
      const gateUpData = randomArray(rows * 2 * I, rows + I, 12);
      // Gates where exp(-g) overflows f32 or underflows to 0: silu must stay finite at both ends.
      gateUpData[0] = -100;
      gateUpData[rows * 2 * I - I - 1] = 100;
      const dOutData = randomArray(rows * I, rows * I);
      const gateUp = engine.tensorFrom('gateUp', [rows, 2 * I], gateUpData);
      const out = engine.tensor('out', [rows, I]);
      const dGateUp = engine.tensorFrom('dGateUp', [rows, 2 * I], randomArray(rows * 2 * I, 9));
      swigluForward(engine, { gateUp, out, rows, I });
      swigluBackward(engine, { gateUp, dOut: engine.tensorFrom('dOut', [rows, I], dOutData), dGateUp, rows, I });
      expectClose(await engine.read(out), swigluForwardRef({ gateUp: gateUpData, rows, I }), 1e-6, 1e-5, 'out');
      expectClose(
        await engine.read(dGateUp),
        swigluBackwardRef({ gateUp: gateUpData, dOut: dOutData, rows, I }),
        1e-6,
        1e-5,
        'dGateUp',
      );
    });
  }
});
