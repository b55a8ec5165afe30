// A line-by-line port of how bitsandbytes stores an LLM.int8 weight (bitsandbytes-foundation/bitsandbytes @
// 95f9af30): nn/modules.py Int8Params._quantize (`B = self.data.to(torch.float16)`, then
// functional.int8_vectorwise_quant(B)), backends/default/ops.py `bitsandbytes::int8_vectorwise_quant` with its default
// threshold 0.0, and _ops.py `bitsandbytes::int8_vectorwise_dequant`; torch ops spelled out over arrays, to check
// engine/int8.ts against. The float16 conversion is engine/half-float.ts's (tested against its own reference).
import { roundToHalf } from '../../engine/index.ts';

/** torch.round (half to even) as x − remainder, then torch's int8 cast; NaN (a zero row: 0 · 127/0) taken as 0. */
function torchRoundToInt8(x: number): number {
  if (Number.isNaN(x)) return 0;
  const down = Math.floor(x);
  const diff = x - down;
  const rounded = diff > 0.5 || (diff === 0.5 && down % 2 !== 0) ? down + 1 : down;
  return ((rounded + 128) & 255) - 128;
}

/** Int8Params._quantize of W [rows, cols]: CB (int8) and SCB (float32 row absmax). */
export function bnbInt8ParamsQuantize(W: ArrayLike<number>, rows: number, cols: number) {
  const B = roundToHalf('f16', W);
  const SCB = new Float32Array(rows);
  const CB = new Int8Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    // row_stats = torch.max(A.abs(), dim=1).values.float()
    for (let c = 0; c < cols; c++) SCB[r] = Math.max(SCB[r], Math.abs(B[r * cols + c]));
    // out_row = torch.round(A * (127.0 / row_stats.unsqueeze(-1))).to(torch.int8): a float32 quotient, and the
    // float16 A promoted to float32 for the product.
    const scale = Math.fround(127.0 / SCB[r]);
    for (let c = 0; c < cols; c++) CB[r * cols + c] = torchRoundToInt8(Math.fround(B[r * cols + c] * scale));
  }
  return { CB, SCB };
}

/** int8_vectorwise_dequant: A * stats.view(-1, 1) * 7.874015718698502e-3, each product in float32. */
export function bnbInt8VectorwiseDequant(CB: Int8Array, SCB: Float32Array, cols: number): Float32Array {
  const k = Math.fround(7.874015718698502e-3);
  return Float32Array.from(CB, (q, i) => Math.fround(Math.fround(q * SCB[Math.floor(i / cols)]) * k));
}
