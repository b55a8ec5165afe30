// Attention over windows of a sequence's rows, for a micro-batch whose fused q/k/v (R, W) or attention output
// (R, NH·HS) is above one binding (Qwen3-1.7B: 16 KiB of q/k/v a token, so one 8,193-token sequence is above 128 MiB).
// Each sequence's queries run in windows of S rows (a multiple of 64, so every view starts aligned):
// - forward and dq: a query window against every key it sees, the keys (and values) read from compact (R, NKV·HS)
//   copies gathered out of the fused q/k/v, so a sequence's keys need T·NKV·HS floats in one binding, not T·W;
//   where even those are above one binding (Qwen3: 32,768 tokens at 128 MiB), in key windows of a multiple of S rows:
//   the forward's partial results per key window merged by their log-sum-exp (kernels/attention/attention-merge.wgsl),
//   dq summed over key windows (with the saved log-sum-exp and delta each key window's share is separable);
// - dk, dv: a key window of the fused q/k/v against each query window at or after it, added window by window
//   (attentionBackward's `accumulate`), with the saved log-sum-exp and each query window's delta: the backward is
//   separable by query window.
// A query's softmax is over the same keys in the same kernel as unwindowed: its output and log-sum-exp are the same
// bits wherever the kernel splits the keys the same way for a window's block of queries (windows are whole 64-row
// blocks; a last, shorter window may be split otherwise: then to float rounding), and the keys fit one binding. Over
// key windows they are merged sums: to float rounding (a few ulps a merge), as dq is then; dk, dv are summed over
// query windows, so they agree to float rounding.
// What stays bound whole: one window's rows of q/k/v (64 rows at least) and one sequence's key mask (4 bytes a
// token).
import type { Engine, Tensor } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { qkvWidth } from './parameter-layout.ts';
import type { RowChunk } from './row-chunks.ts';
import { chunksOf, rowWindow } from './row-chunks.ts';
import {
  attentionForward,
  attentionBackward,
  attentionMerge,
  type AttentionDims,
} from '../kernels/attention/attention.ts';
import { gatherRows } from '../kernels/util/gather-rows.ts';

/** Rows a window of one sequence's queries (and keys) holds, or null when attention binds the micro-batch whole. */
export function attentionWindowRows(
  c: DecoderConfig,
  B: number,
  T: number,
  maxBindingBytes: number,
  alignBytes: number,
): number | null {
  const W = qkvWidth(c);
  const NHS = c.numHeads * c.headDim;
  const f32 = 4;
  if (B * T * Math.max(W, NHS) * f32 <= maxBindingBytes) return null;
  // A view of q/k/v starts aligned up to alignBytes before its first row (the rest is the kernel's column offset).
  const step = alignBytes / f32;
  const S = Math.floor((maxBindingBytes - alignBytes) / (Math.max(W, NHS) * f32) / step) * step;
  if (S < step)
    throw new Error(
      `attention: a window of ${step} rows of q/k/v (${W} floats) is above the ${maxBindingBytes}-byte binding limit`,
    );
  if (B > 1 && (T * NHS * f32) % alignBytes !== 0)
    throw new Error(
      `attention: a sequence of ${T} tokens × ${NHS} floats of output does not end ${alignBytes}-byte aligned, so ` +
        'its windows cannot be bound; use one sequence per micro-batch',
    );
  return Math.min(S, Math.ceil(T / step) * step);
}

/** Rows of a window of one sequence's keys for the forward and dq (a multiple of the query windows' S), or null
 *  when a sequence's compact keys (T × NKV·HS floats) fit one binding from an aligned start. At least S: a query
 *  window's q/k/v rows, wider than its keys, bind. */
export function keyWindowRows(
  c: DecoderConfig,
  T: number,
  S: number,
  maxBindingBytes: number,
  alignBytes: number,
): number | null {
  const rowBytes = c.numKvHeads * c.headDim * 4;
  if (T * rowBytes + alignBytes <= maxBindingBytes) return null;
  return Math.floor((maxBindingBytes - alignBytes) / (rowBytes * S)) * S;
}

/** The activations of one layer's attention. */
export interface AttentionTensors {
  qkv: Tensor; //   (R, W) q, k after norm and RoPE; v
  out: Tensor; //   (R, NH·HS)
  lse: Tensor; //   windowed: (B, windows, NH, S), block (b, w) holding the window's (NH, rows)
}

/** Per-forward state of windowed attention: the compact keys and values, the key mask padded to whole windows per
 *  sequence, the gather indices. */
export interface AttentionWindowState {
  S: number;
  /** keyWindowRows: null where a sequence's keys bind whole. */
  keyRows: number | null;
  /** A key window's partial output (S, NH·HS) and log-sum-exp (NH, S), merged into the query window's; only with
   *  keyRows. */
  partial: { out: Tensor; lse: Tensor } | null;
  keys: Tensor; //    (R, NKV·HS)
  values: Tensor; //  (R, NKV·HS)
  mask: Tensor<'u32'>; // (B, Tp): each sequence's key mask from an aligned start (Tp a multiple of the alignment)
  Tp: number;
  /** Rows of the fused q/k/v, as rows of HS, that hold a window's keys / values (n·NKV entries, for n rows). */
  index: (rows: number) => { keys: Tensor<'u32'>; values: Tensor<'u32'> };
}

/** `t`'s elements [offset, offset + n) bound from the aligned element at or before `offset`: the view and the
 *  column offset of `offset` within it. */
function alignedFrom(t: Tensor, offset: number, n: number, alignElements: number): { view: Tensor; rest: number } {
  const start = Math.floor(offset / alignElements) * alignElements;
  return { view: t.view(`${t.name}[${offset}:+${n}]`, start, [offset - start + n]), rest: offset - start };
}

export class AttentionWindows {
  constructor(
    private readonly engine: Engine,
    private readonly c: DecoderConfig,
  ) {}

  private get alignElements(): number {
    return this.engine.caps.minStorageBufferOffsetAlignment / 4;
  }

  /** The layer's keys and values gathered into `state`'s compact copies, over the trunk's row windows. */
  gatherKeys(state: AttentionWindowState, qkv: Tensor, chunks: RowChunk[], R: number): void {
    const c = this.c;
    const W = qkvWidth(c);
    const kv = c.numKvHeads * c.headDim;
    for (const chunk of chunks) {
      const source = rowWindow(qkv, W, chunk, R).reshape([(chunk.rows * W) / c.headDim, c.headDim]);
      const index = state.index(chunk.rows);
      for (const [rows, out] of [
        [index.keys, state.keys],
        [index.values, state.values],
      ] as const)
        gatherRows(this.engine, {
          source,
          sourceStride: c.headDim,
          rows,
          m: chunk.rows * c.numKvHeads,
          width: c.headDim,
          out: rowWindow(out, kv, chunk, R),
        });
    }
  }

  /** Dims, q and the output views of sequence b's query window w. */
  private queryWindow(state: AttentionWindowState, a: AttentionTensors, b: number, T: number, w: RowChunk, i: number) {
    const c = this.c;
    const W = qkvWidth(c);
    const NHS = c.numHeads * c.headDim;
    const row = b * T + w.first;
    const q = alignedFrom(a.qkv, row * W, w.rows * W, this.alignElements);
    const windows = Math.ceil(T / state.S);
    return {
      q,
      out: a.out.view(`${a.out.name}[${row}:+${w.rows}]`, row * NHS, [w.rows, NHS]),
      lse: a.lse.view(`${a.lse.name}[${b}, ${i}]`, (b * windows + i) * c.numHeads * state.S, [c.numHeads, w.rows]),
      mask: (first: number, n: number) =>
        state.mask.view(`${state.mask.name}[${b}, ${first}:+${n}]`, b * state.Tp + first, [n]),
    };
  }

  private dims(
    Tq: number,
    Tk: number,
    queryStart: number,
  ): Pick<AttentionDims, 'B' | 'Tq' | 'Tk' | 'NH' | 'NKV' | 'HS' | 'queryStart' | 'scale'> {
    const c = this.c;
    return {
      B: 1,
      Tq,
      Tk,
      NH: c.numHeads,
      NKV: c.numKvHeads,
      HS: c.headDim,
      queryStart,
      scale: 1 / Math.sqrt(c.headDim),
    };
  }

  /** The key windows [first, first + rows) of a query window whose queries see keys [0, Tk): one, or windows of
   *  keyRows (a multiple of S, so each starts at or before the query window). */
  private keyWindows(state: AttentionWindowState, Tk: number): RowChunk[] {
    return state.keyRows && Tk > state.keyRows ? chunksOf(Tk, state.keyRows) : [{ first: 0, rows: Tk }];
  }

  /** The compact keys and values of sequence b's tokens [first, first + n). */
  private compactKeys(state: AttentionWindowState, b: number, T: number, first: number, n: number) {
    const kv = this.c.numKvHeads * this.c.headDim;
    const keys = alignedFrom(state.keys, (b * T + first) * kv, n * kv, this.alignElements);
    const values = alignedFrom(state.values, (b * T + first) * kv, n * kv, this.alignElements);
    return {
      k: keys.view,
      v: values.view,
      kRowStride: kv,
      vRowStride: kv,
      kColOffset: keys.rest,
      vColOffset: values.rest,
      kvBatchStride: n * kv,
    };
  }

  forward(state: AttentionWindowState, a: AttentionTensors, B: number, T: number): void {
    const c = this.c;
    const W = qkvWidth(c);
    const NHS = c.numHeads * c.headDim;
    for (let b = 0; b < B; b++)
      chunksOf(T, state.S).forEach((w, i) => {
        const view = this.queryWindow(state, a, b, T, w, i);
        this.keyWindows(state, w.first + w.rows).forEach((k, j) => {
          // The first key window writes the query window's output; each later one a partial merged into it.
          const partial = j > 0 && state.partial;
          const out = partial ? partial.out.view(`${partial.out.name}[:${w.rows}]`, 0, [w.rows, NHS]) : view.out;
          const lse = partial ? partial.lse.view(`${partial.lse.name}[:${w.rows}]`, 0, [c.numHeads, w.rows]) : view.lse;
          attentionForward(this.engine, {
            ...this.dims(w.rows, k.rows, w.first - k.first),
            ...this.compactKeys(state, b, T, k.first, k.rows),
            q: view.q.view,
            qRowStride: W,
            qColOffset: view.q.rest,
            keyMask: view.mask(k.first, k.rows),
            out,
            lse,
            keyWindow: true,
          });
          if (partial)
            attentionMerge(this.engine, {
              Tq: w.rows,
              NH: c.numHeads,
              HS: c.headDim,
              queryStart: w.first,
              keyStart: k.first,
              keyEnd: k.first + k.rows,
              out: view.out,
              lse: view.lse,
              partOut: out,
              partLse: lse,
              keyMask: view.mask(0, k.first + k.rows),
            });
        });
      });
  }

  /** dq of every query window, then dk, dv of every key window summed over the query windows at or after it, into
   *  the fused dQkv (R, W). */
  backward(state: AttentionWindowState, a: AttentionTensors, dOut: Tensor, dQkv: Tensor, B: number, T: number): void {
    const c = this.c;
    const W = qkvWidth(c);
    const NH = c.numHeads;
    const NHS = NH * c.headDim;
    const windows = chunksOf(T, state.S);
    for (let b = 0; b < B; b++) {
      const views = windows.map((w, i) => {
        const view = this.queryWindow(state, a, b, T, w, i);
        const row = b * T + w.first;
        return {
          ...view,
          dOut: dOut.view(`${dOut.name}[${row}:+${w.rows}]`, row * NHS, [w.rows, NHS]),
          dq: alignedFrom(dQkv, row * W, w.rows * W, this.alignElements).view,
        };
      });
      windows.forEach((w, i) => {
        const view = views[i];
        // dq summed over the key windows: the saved log-sum-exp normalises each key window's probabilities.
        this.keyWindows(state, w.first + w.rows).forEach((k, j) => {
          const keys = this.compactKeys(state, b, T, k.first, k.rows);
          attentionBackward(this.engine, {
            ...this.dims(w.rows, k.rows, w.first - k.first),
            ...keys,
            q: view.q.view,
            qRowStride: W,
            qColOffset: view.q.rest,
            keyMask: view.mask(k.first, k.rows),
            out: view.out,
            lse: view.lse,
            dOut: view.dOut,
            dq: view.dq,
            dk: keys.k,
            dv: keys.v,
            passes: 'dq',
            keyWindow: true,
            accumulate: j > 0,
          });
        });
      });
      windows.forEach((kw, k) => {
        // The key window's rows of the fused q/k/v and of its gradient: k and v, dk and dv at their columns.
        const kv = views[k].q;
        const dkv = views[k].dq;
        for (let i = k; i < windows.length; i++) {
          const qw = windows[i];
          const view = views[i];
          attentionBackward(this.engine, {
            ...this.dims(qw.rows, kw.rows, qw.first - kw.first),
            q: view.q.view,
            qRowStride: W,
            qColOffset: view.q.rest,
            k: kv.view,
            v: kv.view,
            kRowStride: W,
            vRowStride: W,
            kColOffset: kv.rest + NHS,
            vColOffset: kv.rest + NHS + c.numKvHeads * c.headDim,
            kvBatchStride: kw.rows * W,
            keyMask: view.mask(kw.first, kw.rows),
            out: view.out,
            lse: view.lse,
            dOut: view.dOut,
            dq: view.dq,
            dk: dkv,
            dv: dkv,
            passes: 'dkdv',
            keyWindow: true,
            accumulate: i > k,
          });
        }
      });
    }
  }
}
