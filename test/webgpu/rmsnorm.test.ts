import { describe, it, beforeAll, afterAll } from 'vitest';
import { Engine, readKnobs } from '../../engine/index.ts';
import { rmsnormForward, rmsnormBackward } from '../../kernels/layers/rmsnorm.ts';
import { rmsnormForwardRef, rmsnormBackwardRef } from '../../kernels/layers/rmsnorm.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

describe.each(['workgroup-per-row', 'lane-per-row'])('rmsnorm kernel, variant %s', (variant) => {
  let engine: Engine;
  beforeAll(async () => {
    const knobs = readKnobs();
    engine = await Engine.create({ ...knobs, kernelVariants: { ...knobs.kernelVariants, rmsnorm: variant } });
  });
  afterAll(async () => {
    await engine.sync();
    engine.destroy();
  });

  const cases = [
    { rows: 1, cols: 4, accumulate: false },
    { rows: 7, cols: 12, accumulate: true },
    { rows: 33, cols: 130, accumulate: false },
    { rows: 33, cols: 260, accumulate: true },
  ];
  for (const { rows, cols, accumulate } of cases) {
    it(
      `forward and backward match the reference for rows=${rows}, cols=${cols}, ` + `accumulate=${accumulate}`,
      async () => {
        const eps = 1e-6;
        const xData = randomArray(rows * cols, rows + cols, 3);
        const weightData = randomArray(cols, cols);
        const dOutData = randomArray(rows * cols, rows * cols);
        const dxBefore = randomArray(rows * cols, 5);
        const dWeightBefore = randomArray(cols, 6);
        const x = engine.tensorFrom('x', [rows, cols], xData);
        const weight = engine.tensorFrom('weight', [cols], weightData);
        const out = engine.tensor('out', [rows, cols]);
        const rstd = engine.tensor('rstd', [rows]);
        const dx = engine.tensorFrom('dx', [rows, cols], dxBefore);
        const dWeight = engine.tensorFrom('dWeight', [cols], dWeightBefore);
        rmsnormForward(engine, { x, weight, out, rstd, rows, cols, eps });
        rmsnormBackward(engine, {
          x,
          weight,
          rstd,
          dOut: engine.tensorFrom('dOut', [rows, cols], dOutData),
          dx,
          dWeight,
          rows,
          cols,
          accumulateDx: accumulate,
          accumulateDWeight: !accumulate,
        });

        const ref = rmsnormForwardRef({ x: xData, weight: weightData, rows, cols, eps });
        expectClose(await engine.read(out), ref.out, 1e-5, 1e-5, 'out');
        expectClose(await engine.read(rstd), ref.rstd, 0, 1e-5, 'rstd');
        const grads = rmsnormBackwardRef({ x: xData, weight: weightData, rstd: ref.rstd, dOut: dOutData, rows, cols });
        const dxWant = accumulate ? grads.dx.map((g, k) => g + dxBefore[k]) : grads.dx;
        const dWeightWant = accumulate ? grads.dWeight : grads.dWeight.map((g, c) => g + dWeightBefore[c]);
        expectClose(await engine.read(dx), dxWant, 1e-5, 1e-5, 'dx');
        expectClose(await engine.read(dWeight), dWeightWant, 1e-5, 1e-5, 'dWeight');
      },
    );
  }
});
