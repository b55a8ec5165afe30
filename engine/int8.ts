// LLM.int8's weight storage (Dettmers et al. 2022) as bitsandbytes' Int8Params keeps a frozen nn.Linear when HF
// loads a model with load_in_8bit (bitsandbytes/nn/modules.py Int8Params._quantize; backends/default/ops.py
// int8_vectorwise_quant with its default threshold 0; _ops.py int8_vectorwise_dequant): the weight converted to
// float16, then each row scaled by 127 / its absmax (SCB, float32) and rounded half to even into int8; W ≈ CB · SCB ·
// (1/127), the reciprocal a float32 constant. Four codes per u32 word little-endian, so byte j of bitsandbytes' CB
// is byte j of the words here. 1 byte per weight plus 4 per row.
// Only the weight format is LLM.int8's: products here take float32 activations times the dequantized weight, not
// bitsandbytes' int8 × int8 matmul with outlier columns (|x| ≥ llm_int8_threshold) split off in fp16 — the result
// bitsandbytes would give if every column were an outlier column, in float32 (docs/models-and-memory.md).
import { roundToHalf } from './half-float.ts';
import { BYTES_PER_ELEMENT } from './tensor.ts';

/** int8_vectorwise_dequant's multiplier, 1/127 as the float32 torch multiplies by. */
export const INT8_DEQUANT_SCALE = Math.fround(7.874015718698502e-3);

/** The storage of a [rows, cols] weight: words of codes and one float32 scale (SCB) per row. */
export function int8Sizes(rows: number, cols: number): { words: number; bytes: number } {
  const words = Math.ceil((rows * cols) / 4);
  return { words, bytes: (words + rows) * BYTES_PER_ELEMENT };
}

/** torch.round: halves to the even neighbour. */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const fraction = x - floor;
  if (fraction !== 0.5) return Math.round(x);
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The [rows, cols] row-major `values` quantized as Int8Params does. A zero row's scale is 0 and its codes 0
 *  (bitsandbytes computes 0 · 127/0, NaN, whose int8 cast is undefined; either way it dequantizes to 0). */
export function quantizeInt8Rows(
  values: ArrayLike<number>,
  rows: number,
  cols: number,
): { codes: Uint32Array; scb: Float32Array } {
  if (values.length !== rows * cols)
    throw new Error(`quantizeInt8Rows: ${values.length} values, expected ${rows} × ${cols}`);
  const half = roundToHalf('f16', values);
  const codes = new Uint32Array(int8Sizes(rows, cols).words);
  const bytes = new Int8Array(codes.buffer);
  const scb = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const row = half.subarray(r * cols, (r + 1) * cols);
    let max = 0;
    for (const x of row) max = Math.max(max, Math.abs(x));
    if (!Number.isFinite(max))
      throw new Error(`quantizeInt8Rows: row ${r} holds a value beyond float16's range (±65504), which LLM.int8 reads`);
    scb[r] = max;
    if (max === 0) continue;
    const scale = Math.fround(127 / max);
    for (let c = 0; c < cols; c++) bytes[r * cols + c] = roundHalfEven(Math.fround(row[c] * scale));
  }
  return { codes, scb };
}

/** The code of element i (signed). */
export function int8CodeAt(codes: Uint32Array, i: number): number {
  return ((codes[i >> 2] >>> (8 * (i & 3))) << 24) >> 24;
}

/** The float32 values the codes stand for: fround(fround(code · SCB) · 1/127), int8_vectorwise_dequant's order. */
export function dequantizeInt8Rows(codes: Uint32Array, scb: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let i = 0; i < out.length; i++)
    out[i] = Math.fround(int8CodeAt(codes, i) * scb[Math.floor(i / cols)]) * INT8_DEQUANT_SCALE;
  return out;
}
