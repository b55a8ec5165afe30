// The reference backward of attention against central finite differences of f(q, k, v) = Σ dOut∘out, in float64.
import { describe, it, expect } from 'vitest';
import {
  attentionForwardRef,
  attentionBackwardRef,
  mergeAttentionStatesRef,
  type AttentionRefArgs,
  type AttentionStateRef,
} from '../../kernels/attention/attention.ref.ts';
import type { AttentionDims } from '../../kernels/attention/attention.ts';
import { seededRandom } from '../support/arrays.ts';
import { separateQkvDims } from '../support/attention-dims.ts';
import { numericGradientError } from '../support/numeric-gradient.ts';

function random64(n: number, seed: number): Float64Array {
  const random = seededRandom(seed);
  return Float64Array.from({ length: n }, () => random() * 2 - 1);
}

function objective(args: AttentionRefArgs, dOut: Float64Array): number {
  const { out } = attentionForwardRef(args);
  let sum = 0;
  for (let i = 0; i < out.length; i++) sum += dOut[i] * out[i];
  return sum;
}

/** Largest relative error of `analytic` against central differences of the objective in `param`. */
function finiteDifferenceError(
  args: AttentionRefArgs,
  dOut: Float64Array,
  param: Float64Array,
  analytic: Float64Array,
): number {
  return numericGradientError(param, () => objective(args, dOut), analytic, { h: 1e-5 });
}

/** Row 1 left-padded by `pad` keys. */
function leftPaddedMask(B: number, Tk: number, pad: number, stride = Tk): Float64Array {
  const mask = new Float64Array(B * stride);
  for (let b = 0; b < B; b++) for (let j = 0; j < Tk; j++) mask[b * stride + j] = b === 1 && j < pad ? 0 : 1;
  return mask;
}

describe('attention reference backward', () => {
  it('matches finite differences on a fused qkv buffer with GQA and left padding', () => {
    const [B, T, NH, NKV, HS] = [2, 5, 4, 2, 3];
    const W = (NH + 2 * NKV) * HS;
    const dims: AttentionDims = {
      B,
      Tq: T,
      Tk: T,
      NH,
      NKV,
      HS,
      qRowStride: W,
      qColOffset: 0,
      kRowStride: W,
      kColOffset: NH * HS,
      vRowStride: W,
      vColOffset: (NH + NKV) * HS,
      kvBatchStride: T * W,
      queryStart: 0,
      scale: 0.8,
    };
    const qkv = random64(B * T * W, 1);
    const args: AttentionRefArgs = { ...dims, q: qkv, k: qkv, v: qkv, keyMask: leftPaddedMask(B, T, 2) };
    const dOut = random64(B * T * NH * HS, 2);
    const { dq, dk, dv } = attentionBackwardRef({ ...args, dOut });
    const dqkv = dq.map((x, i) => x + dk[i] + dv[i]);
    expect(finiteDifferenceError(args, dOut, qkv, dqkv)).toBeLessThan(1e-6);
    // Pad queries (row 1, t < 2) see no key: zero output, zero lse, zero gradient.
    const { out, lse } = attentionForwardRef(args);
    for (const t of [0, 1]) {
      for (let h = 0; h < NH; h++) {
        expect(lse[(NH + h) * T + t]).toBe(0);
        for (let d = 0; d < HS; d++) expect(out[((T + t) * NH + h) * HS + d]).toBe(0);
      }
      for (let c = 0; c < NH * HS; c++) expect(dqkv[(T + t) * W + c]).toBe(0);
    }
  });

  it('matches finite differences for queries against a KV cache (queryStart > 0, capacity > Tk)', () => {
    const [B, Tq, Tk, NH, NKV, HS, capacity] = [2, 2, 5, 6, 1, 4, 7];
    const dims = separateQkvDims({
      B,
      Tq,
      Tk,
      NH,
      NKV,
      HS,
      kvRows: capacity,
      queryStart: Tk - Tq,
      scale: 0.5,
      maskBatchStride: capacity,
    });
    const q = random64(B * Tq * NH * HS, 3);
    const k = random64(B * capacity * NKV * HS, 4);
    const v = random64(B * capacity * NKV * HS, 5);
    const args: AttentionRefArgs = { ...dims, q, k, v, keyMask: leftPaddedMask(B, Tk, 3, capacity) };
    const dOut = random64(B * Tq * NH * HS, 6);
    const grads = attentionBackwardRef({ ...args, dOut });
    expect(finiteDifferenceError(args, dOut, q, grads.dq)).toBeLessThan(1e-6);
    expect(finiteDifferenceError(args, dOut, k, grads.dk)).toBeLessThan(1e-6);
    expect(finiteDifferenceError(args, dOut, v, grads.dv)).toBeLessThan(1e-6);
  });
});

describe('attention reference over key windows', () => {
  // models/attention-windows.ts's forward: 4 queries at positions 12–15 against key windows [0, 4), [4, 9), [9, 16),
  // row 1 left-padded by 5 (its first window sees no key), merged by log-sum-exp: attention over all 16 keys.
  it('the merged states of key windows are attention over all keys', () => {
    const [B, Tq, Tk, NH, NKV, HS] = [2, 4, 16, 4, 2, 3];
    const rowStride = NKV * HS;
    const dims = separateQkvDims({ B, Tq, Tk, NH, NKV, HS, kvRows: Tk, queryStart: 12, scale: 1 / Math.sqrt(HS) });
    const args = {
      ...dims,
      q: random64(B * Tq * NH * HS, 31),
      k: random64(B * Tk * rowStride, 32),
      v: random64(B * Tk * rowStride, 33),
      keyMask: leftPaddedMask(B, Tk, 5),
    };
    const whole = attentionForwardRef(args);
    const parts = [
      [0, 4],
      [4, 5],
      [9, 7],
    ].map(([first, rows]) => ({
      seen: (b: number) => Array.from(args.keyMask.subarray(b * Tk + first, b * Tk + first + rows)).includes(1),
      state: attentionForwardRef({
        ...args,
        Tk: rows,
        queryStart: dims.queryStart - first,
        kColOffset: first * rowStride,
        vColOffset: first * rowStride,
        maskBatchStride: Tk,
        keyMask: args.keyMask.subarray(first),
      }),
    }));
    expect(parts[0].seen(1)).toBe(false);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < NH; h++)
        for (let t = 0; t < Tq; t++) {
          const row = ((b * Tq + t) * NH + h) * HS;
          const at = (b * NH + h) * Tq + t;
          const merged = parts
            .map(
              ({ seen, state }): AttentionStateRef => ({
                out: state.out.subarray(row, row + HS),
                lse: state.lse[at],
                seen: seen(b),
              }),
            )
            .reduce(mergeAttentionStatesRef);
          expect(merged.lse).toBeCloseTo(whole.lse[at], 12);
          for (let d = 0; d < HS; d++) expect(merged.out[d]).toBeCloseTo(whole.out[row + d], 12);
        }
  });
});
