import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { headRmsnormForward, headRmsnormBackward } from '../../kernels/layers/head-rmsnorm.ts';
import { headRmsnormForwardRef, headRmsnormBackwardRef } from '../../kernels/layers/head-rmsnorm.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

describe('head-rmsnorm kernel', () => {
  const cases = [
    { rows: 1, NH: 4, NKV: 2, HS: 8 },
    { rows: 7, NH: 6, NKV: 1, HS: 12 },
    { rows: 33, NH: 4, NKV: 2, HS: 32 },
    { rows: 7, NH: 6, NKV: 1, HS: 6 },
    { rows: 33, NH: 6, NKV: 1, HS: 136 },
  ];
  for (const shape of cases) {
    const { rows, NH, NKV, HS } = shape;
    it(`forward and backward match the reference for rows=${rows}, NH=${NH}, NKV=${NKV}, HS=${HS}`, async () => {
      const engine = await gpuEngine();
      const eps = 1e-6;
      const size = rows * (NH + 2 * NKV) * HS;
      const qkvData = randomArray(size, size, 3);
      const qWeightData = randomArray(HS, HS);
      const kWeightData = randomArray(HS, HS + 1);
      const dOutData = randomArray(size, 7);
      const dQWeightBefore = randomArray(HS, 8);
      const dKWeightBefore = randomArray(HS, 9);
      const qkv = engine.tensorFrom('qkv', [rows, size / rows], qkvData);
      const qWeight = engine.tensorFrom('qWeight', [HS], qWeightData);
      const kWeight = engine.tensorFrom('kWeight', [HS], kWeightData);
      const out = engine.tensor('out', [rows, size / rows]);
      const rstd = engine.tensor('rstd', [rows, NH + NKV]);
      const dQkv = engine.tensorFrom('dQkv', [rows, size / rows], randomArray(size, 10));
      const dQWeight = engine.tensorFrom('dQWeight', [HS], dQWeightBefore);
      const dKWeight = engine.tensorFrom('dKWeight', [HS], dKWeightBefore);
      headRmsnormForward(engine, { qkv, qWeight, kWeight, out, rstd, ...shape, eps });
      headRmsnormBackward(engine, {
        qkv,
        qWeight,
        kWeight,
        rstd,
        dOut: engine.tensorFrom('dOut', [rows, size / rows], dOutData),
        dQkv,
        dQWeight,
        dKWeight,
        ...shape,
      });

      const ref = headRmsnormForwardRef({ ...shape, qkv: qkvData, qWeight: qWeightData, kWeight: kWeightData, eps });
      expectClose(await engine.read(out), ref.out, 1e-5, 1e-5, 'out');
      expectClose(await engine.read(rstd), ref.rstd, 0, 1e-5, 'rstd');
      const grads = headRmsnormBackwardRef({
        ...shape,
        qkv: qkvData,
        qWeight: qWeightData,
        kWeight: kWeightData,
        rstd: ref.rstd,
        dOut: dOutData,
      });
      expectClose(await engine.read(dQkv), grads.dQkv, 1e-5, 1e-5, 'dQkv');
      expectClose(
        await engine.read(dQWeight),
        grads.dQWeight.map((g, d) => g + dQWeightBefore[d]),
        1e-5,
        1e-5,
        'dQWeight',
      );
      expectClose(
        await engine.read(dKWeight),
        grads.dKWeight.map((g, d) => g + dKWeightBefore[d]),
        1e-5,
        1e-5,
        'dKWeight',
      );
    });
  }
});
