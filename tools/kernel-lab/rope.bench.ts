// Bench cases of rope for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import { qkvWidth } from '../../models/parameter-layout.ts';
import { ropeForward } from '../../kernels/layers/rope.ts';
import { ropeForwardRef } from '../../kernels/layers/rope.ref.ts';
import { F32_BYTES, MODEL, T, ROWS, checkOutput, randomValues, upload, type KernelBenchCase } from './bench-inputs.ts';

/** Rotary embedding of the q and k heads, in place (ropeBackward is the same shader rotating by -angle). */
export function ropeCases(): KernelBenchCase[] {
  const { numHeads: NH, numKvHeads: NKV, headDim: HS, ropeTheta: theta } = MODEL;
  const rows = ROWS;
  const qkv = randomValues(rows * qkvWidth(MODEL), 11);
  const positions = Int32Array.from({ length: rows }, (_, r) => r % T);
  const ropeForwardExpected = () => ropeForwardRef({ qkv, positions, rows, NH, NKV, HS, theta });
  return [
    {
      op: 'rope',
      kernel: 'rope',
      shape: `rows=${rows},NH=${NH},NKV=${NKV},HS=${HS}`,
      bytes: F32_BYTES * (2 * rows * (NH + NKV) * HS + rows),
      reference: ropeForwardExpected,
      setup: (engine) => {
        const qkvTensor = upload(engine, 'qkv', qkv);
        const positionsTensor = engine.tensorFrom('bench-positions', [rows], positions, 'i32');
        // In place: the check reads the first run's rotation, before the timed runs rotate further.
        return {
          run: () => ropeForward(engine, { qkv: qkvTensor, positions: positionsTensor, rows, NH, NKV, HS, theta }),
          check: () => checkOutput(engine, 'qkv', qkvTensor, ropeForwardExpected(), 1e-5, 1e-4),
        };
      },
    },
  ];
}
