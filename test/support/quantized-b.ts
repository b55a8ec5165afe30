// A frozen LoRA base's weight as matmul's quantized B (engine/nf4.ts, engine/int8.ts), for the kernel tests.
import type { Engine } from '../../engine/index.ts';
import { NF4_BLOCK, compressNf4Statistics, dequantizeNf4, nf4BlockScales, quantizeNf4 } from '../../engine/nf4.ts';
import { dequantizeInt8Rows, quantizeInt8Rows } from '../../engine/int8.ts';

/** The weight W [rows, cols] stored as `format`: codes, matmul's bQuant, the values the kernel should read, and
 *  the magnitude each stands for in the error bound. */
export function quantizedB(
  engine: Engine,
  format: 'nf4' | 'nf4-nested' | 'int8',
  w: Float32Array,
  rows: number,
  cols: number,
) {
  if (format === 'int8') {
    const { codes, scb } = quantizeInt8Rows(w, rows, cols);
    const values = dequantizeInt8Rows(codes, scb, rows, cols);
    return {
      b: engine.tensorFrom('codes', [codes.length], codes, 'u32'),
      bQuant: { format: 'int8', scb: engine.tensorFrom('scb', [rows], scb) } as const,
      values,
      magnitudes: values.map(Math.abs),
    };
  }
  const { codes, absmax } = quantizeNf4(w);
  const b = engine.tensorFrom('codes', [codes.length], codes, 'u32');
  if (format === 'nf4') {
    const values = dequantizeNf4(codes, absmax, w.length);
    return {
      b,
      bQuant: { format: 'nf4', absmax: engine.tensorFrom('absmax', [absmax.length], absmax) } as const,
      values,
      magnitudes: values.map(Math.abs),
    };
  }
  const statistics = compressNf4Statistics(absmax);
  const scales = nf4BlockScales(statistics, absmax.length);
  const largest = Math.max(...scales.map(Math.abs));
  const unit = dequantizeNf4(codes, new Float32Array(absmax.length).fill(1), w.length);
  return {
    b,
    bQuant: {
      format: 'nf4',
      absmax: engine.tensorFrom('statistics', [statistics.length], statistics, 'u32'),
    } as const,
    values: dequantizeNf4(codes, scales, w.length),
    magnitudes: unit.map((c, i) => Math.abs(c) * (Math.abs(scales[Math.floor(i / NF4_BLOCK)]) + 2 * largest)),
  };
}
