// Bench cases of head-rmsnorm for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import type { Engine } from '../../engine/index.ts';
import { qkvWidth } from '../../models/parameter-layout.ts';
import { headRmsnormForward, headRmsnormBackward } from '../../kernels/layers/head-rmsnorm.ts';
import { headRmsnormForwardRef, headRmsnormBackwardRef } from '../../kernels/layers/head-rmsnorm.ref.ts';
import {
  F32_BYTES,
  MODEL,
  ROWS,
  checkOutput,
  checkOutputs,
  randomValues,
  upload,
  type KernelBenchCase,
} from './bench-inputs.ts';

/** Per-head RMSNorm of the q and k heads inside the fused qkv rows (Qwen3's q_norm / k_norm). */
export function headRmsnormCases(): KernelBenchCase[] {
  const { numHeads: NH, numKvHeads: NKV, headDim: HS, rmsNormEps: eps } = MODEL;
  const rows = ROWS;
  const W = qkvWidth(MODEL);
  const qkv = randomValues(rows * W, 7);
  const qWeight = randomValues(HS, 8);
  const kWeight = randomValues(HS, 9);
  const dOut = randomValues(rows * W, 10);
  const headRmsnormForwardExpected = () => headRmsnormForwardRef({ qkv, qWeight, kWeight, rows, NH, NKV, HS, eps });
  const { rstd } = headRmsnormForwardExpected();
  const shape = `rows=${rows},NH=${NH},NKV=${NKV},HS=${HS}`;
  const weights = (engine: Engine) => ({
    qWeight: upload(engine, 'qWeight', qWeight),
    kWeight: upload(engine, 'kWeight', kWeight),
  });
  const headRmsnormBackwardExpected = () =>
    headRmsnormBackwardRef({ qkv, qWeight, kWeight, rstd, dOut, rows, NH, NKV, HS });
  return [
    {
      op: 'head-rmsnorm',
      kernel: 'head-rmsnorm forward',
      shape,
      bytes: F32_BYTES * (2 * rows * W + 2 * HS + rows * (NH + NKV)),
      reference: headRmsnormForwardExpected,
      setup: (engine) => {
        const t = { qkv: upload(engine, 'qkv', qkv), ...weights(engine) };
        const out = engine.tensor('bench-out', [rows * W]);
        const rstdTensor = engine.tensor('bench-rstd', [rows * (NH + NKV)]);
        return {
          run: () => headRmsnormForward(engine, { ...t, out, rstd: rstdTensor, rows, NH, NKV, HS, eps }),
          check: () => checkOutput(engine, 'out', out, headRmsnormForwardExpected().out, 1e-5, 1e-4),
        };
      },
    },
    {
      op: 'head-rmsnorm',
      kernel: 'head-rmsnorm backward',
      shape,
      bytes: F32_BYTES * (3 * rows * W + rows * (NH + NKV) + 6 * HS),
      reference: headRmsnormBackwardExpected,
      setup: (engine) => {
        const t = {
          qkv: upload(engine, 'qkv', qkv),
          ...weights(engine),
          rstd: upload(engine, 'rstd', Float32Array.from(rstd)),
          dOut: upload(engine, 'dOut', dOut),
        };
        const dQkv = engine.tensor('bench-dQkv', [rows * W]);
        const dQWeight = engine.tensor('bench-dQWeight', [HS]);
        const dKWeight = engine.tensor('bench-dKWeight', [HS]);
        // One run from zeroed weight gradients, which are added to.
        return {
          run: () => headRmsnormBackward(engine, { ...t, dQkv, dQWeight, dKWeight, rows, NH, NKV, HS }),
          check: () => {
            const expected = headRmsnormBackwardExpected();
            return checkOutputs(engine, [
              ['dQkv', dQkv, expected.dQkv, 1e-5, 1e-4],
              ['dQWeight', dQWeight, expected.dQWeight, 1e-4, 1e-4],
              ['dKWeight', dKWeight, expected.dKWeight, 1e-4, 1e-4],
            ]);
          },
        };
      },
    },
  ];
}
