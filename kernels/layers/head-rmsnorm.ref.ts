// CPU reference of kernels/layers/head-rmsnorm (float64): Qwen3's q_norm/k_norm on the fused qkv buffer
// (rows, (NH + 2*NKV)*HS). Each row's q heads are a contiguous (NH, HS) block and its k heads an (NKV, HS) block,
// so both are plain RMSNorms over HS, written here with the rmsnorm reference.
import { rmsnormForwardRef, rmsnormBackwardRef } from './rmsnorm.ref.ts';

interface HeadShape {
  rows: number;
  NH: number;
  NKV: number;
  HS: number;
}

/** The normalised heads of a row: q heads [0, NH) with qWeight, then k heads [NH, NH + NKV) with kWeight. */
function normedBlocks({ NH, NKV }: HeadShape): { first: number; count: number; isQ: boolean }[] {
  return [
    { first: 0, count: NH, isQ: true },
    { first: NH, count: NKV, isQ: false },
  ];
}

export function headRmsnormForwardRef(
  a: HeadShape & {
    qkv: ArrayLike<number>;
    qWeight: ArrayLike<number>;
    kWeight: ArrayLike<number>;
    eps: number;
  },
): { out: Float64Array; rstd: Float64Array } {
  const { rows, NH, NKV, HS, eps } = a;
  const qkv = Float64Array.from(a.qkv);
  const out = qkv.slice();
  const rstd = new Float64Array(rows * (NH + NKV));
  const rowSize = (NH + 2 * NKV) * HS;
  for (let r = 0; r < rows; r++) {
    for (const { first, count, isQ } of normedBlocks(a)) {
      const at = r * rowSize + first * HS;
      const block = rmsnormForwardRef({
        x: qkv.subarray(at, at + count * HS),
        weight: isQ ? a.qWeight : a.kWeight,
        rows: count,
        cols: HS,
        eps,
      });
      out.set(block.out, at);
      rstd.set(block.rstd, r * (NH + NKV) + first);
    }
  }
  return { out, rstd };
}

/** The gradients alone (the GPU launcher adds the weight gradients to what dQWeight and dKWeight held). */
export function headRmsnormBackwardRef(
  a: HeadShape & {
    qkv: ArrayLike<number>;
    qWeight: ArrayLike<number>;
    kWeight: ArrayLike<number>;
    rstd: ArrayLike<number>;
    dOut: ArrayLike<number>;
  },
): { dQkv: Float64Array; dQWeight: Float64Array; dKWeight: Float64Array } {
  const { rows, NH, NKV, HS } = a;
  const qkv = Float64Array.from(a.qkv);
  const dOut = Float64Array.from(a.dOut);
  const rstd = Float64Array.from(a.rstd);
  const dQkv = dOut.slice();
  const dQWeight = new Float64Array(HS);
  const dKWeight = new Float64Array(HS);
  const rowSize = (NH + 2 * NKV) * HS;
  for (let r = 0; r < rows; r++) {
    for (const { first, count, isQ } of normedBlocks(a)) {
      const at = r * rowSize + first * HS;
      const grads = rmsnormBackwardRef({
        x: qkv.subarray(at, at + count * HS),
        weight: isQ ? a.qWeight : a.kWeight,
        rstd: rstd.subarray(r * (NH + NKV) + first, r * (NH + NKV) + first + count),
        dOut: dOut.subarray(at, at + count * HS),
        rows: count,
        cols: HS,
      });
      dQkv.set(grads.dx, at);
      const dWeight = isQ ? dQWeight : dKWeight;
      for (let d = 0; d < HS; d++) dWeight[d] += grads.dWeight[d];
    }
  }
  return { dQkv, dQWeight, dKWeight };
}
