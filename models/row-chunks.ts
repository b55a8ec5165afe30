// Row chunks for a decoder trunk. Its fused gate/up activation (R, 2I) and gradient are its widest tensors (Qwen3-8B:
// 96 KiB a token, so one 1,536-token sequence is 144 MiB, above WebGPU's 128 MiB binding), then the fused qkv and the
// residual stream. Every trunk op but attention is row-wise (the embedding, norms, RoPE, matmul rows, SwiGLU, the
// LoRA products, the LM and value heads) except the weight gradients, which sum over rows; so those ops run over
// windows of whole rows that each bind, and the weight gradients accumulate window by window.
import { alignedRows, lcm, rowsPerWindow, type Tensor } from '../engine/index.ts';

export interface RowChunk {
  first: number;
  rows: number;
}

/**
 * The row windows [first, first+rows) the trunk's row-wise ops over R rows run in, given the row widths (in 4-byte
 * words) of every tensor they bind by rows: one window of all R rows when the widest fits one binding (the unchunked
 * schedule), else windows of the same size (the last shorter) in which every tensor fits `maxBindingBytes` and
 * starts `alignBytes`-aligned. Throws (one line) when one aligned window of rows cannot fit.
 */
export function rowChunks(
  R: number,
  widths: readonly number[],
  maxBindingBytes: number,
  alignBytes: number,
): RowChunk[] {
  const widest = Math.max(...widths);
  if (R * widest * 4 <= maxBindingBytes) return [{ first: 0, rows: R }];
  // Every window starts at a multiple of `step` rows: a multiple of each width's alignment quantum.
  const quantum = widths.reduce((q, w) => lcm(q, alignedRows(w * 4, alignBytes)), 1);
  const step = Math.floor(rowsPerWindow(widest, maxBindingBytes, 4) / quantum) * quantum;
  if (step < 1)
    throw new Error(
      `a decoder row window of ${quantum} rows of ${widest} floats (${alignBytes}-byte aligned) is above the ` +
        `${maxBindingBytes}-byte binding limit`,
    );
  return chunksOf(R, step);
}

/** R rows as windows of `step` rows, the last shorter. */
export function chunksOf(R: number, step: number): RowChunk[] {
  const chunks: RowChunk[] = [];
  for (let first = 0; first < R; first += step) chunks.push({ first, rows: Math.min(step, R - first) });
  return chunks;
}

/** Rows [first, first+rows) of `t` (rows of `width`), or `t` itself when the chunk is all R rows (or `t` is absent). */
export function rowWindow<T extends Tensor | undefined | null>(t: T, width: number, chunk: RowChunk, R: number): T {
  if (!t || chunk.rows === R) return t;
  return t.view(`${t.name}[${chunk.first}:${chunk.first + chunk.rows}]`, chunk.first * width, [chunk.rows, width]) as T;
}

/** rowWindow bound to one chunk: the chunk's rows of any (R, width) tensor (width 1: per-token values). */
export function chunkRows(chunk: RowChunk, R: number) {
  return <T extends Tensor | undefined | null>(t: T, width = 1): T => rowWindow(t, width, chunk, R);
}
