// The references of a sample of output rows (gpu-report's real-size validation, tools/kernel-lab/at-scale.ts) give,
// at a small shape, the whole references' values at those rows: attention's rows and its backward from the
// forward's out and lse, the LM head's rows and its backward from the forward's lse and entropy, decode attention's
// heads. Left-padded rows included, so masked keys and the empty-row convention are covered.
import { describe, it, expect } from 'vitest';
import {
  attentionBackwardAtRef,
  attentionBackwardRef,
  attentionForwardRef,
  type AttentionRefArgs,
} from '../../kernels/attention/attention.ref.ts';
import { lmHeadBackwardAtRef, lmHeadBackwardRef, lmHeadForwardRef } from '../../kernels/layers/lm-head.ref.ts';
import { decodeAttentionRef } from '../../kernels/decode/decode-attention.ref.ts';
import { randomArray } from '../support/arrays.ts';

const rowsOf = (values: ArrayLike<number>, at: number[], width: number) =>
  at.flatMap((o) => Array.from({ length: width }, (_, d) => values[o + d]));

describe('sampled references', () => {
  const [B, T, NH, NKV, HS] = [2, 12, 4, 2, 8];
  const W = (NH + 2 * NKV) * HS;
  const qkv = randomArray(B * T * W, 1);
  // Batch 1 is left-padded over its first 4 positions: its first queries attend to nothing.
  const keyMask = Array.from({ length: B * T }, (_, i) => (i >= T && i < T + 4 ? 0 : 1));
  const args: AttentionRefArgs = {
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
    scale: 1 / Math.sqrt(HS),
    q: qkv,
    k: qkv,
    v: qkv,
    keyMask,
  };
  const queries = [
    { b: 0, t: 0, h: 0 },
    { b: 0, t: 7, h: 3 },
    { b: 1, t: 2, h: 1 },
    { b: 1, t: 11, h: 2 },
  ];
  const keys = [
    { b: 0, j: 0, g: 0 },
    { b: 0, j: 11, g: 1 },
    { b: 1, j: 3, g: 1 },
    { b: 1, j: 5, g: 0 },
  ];

  it('attention forward: the sampled rows equal the whole reference', () => {
    const whole = attentionForwardRef(args);
    const sampled = attentionForwardRef(args, queries);
    const outAt = queries.map(({ b, t, h }) => ((b * T + t) * NH + h) * HS);
    const lseAt = queries.map(({ b, t, h }) => (b * NH + h) * T + t);
    expect(rowsOf(sampled.out, outAt, HS)).toEqual(rowsOf(whole.out, outAt, HS));
    expect(rowsOf(sampled.lse, lseAt, 1)).toEqual(rowsOf(whole.lse, lseAt, 1));
  });

  it("attention backward: dq, dk, dv of the sampled rows from the forward's out and lse", () => {
    const dOut = randomArray(B * T * NH * HS, 2);
    const whole = attentionBackwardRef({ ...args, dOut });
    const { out, lse } = attentionForwardRef(args);
    const at = attentionBackwardAtRef({ ...args, dOut, out, lse }, { queries, keys });
    const close = (got: Float64Array[], want: number[]) => {
      expect(got.flatMap((row) => Array.from(row)).length).toBe(want.length);
      got.flatMap((row) => Array.from(row)).forEach((x, i) => expect(x).toBeCloseTo(want[i], 12));
    };
    close(
      at.dq,
      rowsOf(
        whole.dq,
        queries.map(({ b, t, h }) => (b * T + t) * W + h * HS),
        HS,
      ),
    );
    close(
      at.dk,
      rowsOf(
        whole.dk,
        keys.map(({ b, j, g }) => (b * T + j) * W + (NH + g) * HS),
        HS,
      ),
    );
    close(
      at.dv,
      rowsOf(
        whole.dv,
        keys.map(({ b, j, g }) => (b * T + j) * W + (NH + NKV + g) * HS),
        HS,
      ),
    );
    // The padded query (b 1, t 2) has no key: no gradient, as the kernel's convention.
    expect(Array.from(at.dq[2])).toEqual(new Array(HS).fill(0));
  });

  it("LM head: sampled rows' statistics, and dHidden, dWeight rows from the forward's lse and entropy", () => {
    const [N, C, V] = [6, 8, 50];
    const a = {
      hidden: randomArray(N * C, 3),
      weight: randomArray(V * C, 4),
      targets: [0, 49, 7, 3, 3, 20],
      N,
      C,
      V,
      temperature: 0.7,
    };
    const whole = lmHeadForwardRef(a);
    const rows = [0, 3, 5];
    const sampled = lmHeadForwardRef(a, rows);
    for (const key of ['logprobs', 'entropy', 'lse', 'sumPiSquared'] as const)
      expect(rowsOf(sampled[key], rows, 1)).toEqual(rowsOf(whole[key], rows, 1));
    const grads = { dLogprobs: randomArray(N, 5), dEntropy: randomArray(N, 6) };
    const wholeBackward = lmHeadBackwardRef({ ...a, ...grads });
    const vocabRows = [0, 7, 49];
    const at = lmHeadBackwardAtRef({ ...a, ...grads, lse: whole.lse, entropy: whole.entropy }, { rows, vocabRows });
    const flat = (x: Float64Array[]) => x.flatMap((row) => Array.from(row));
    flat(at.dHidden).forEach((x, i) =>
      expect(x).toBeCloseTo(
        rowsOf(
          wholeBackward.dHidden,
          rows.map((n) => n * C),
          C,
        )[i],
        12,
      ),
    );
    flat(at.dWeight).forEach((x, i) =>
      expect(x).toBeCloseTo(
        rowsOf(
          wholeBackward.dWeight,
          vocabRows.map((v) => v * C),
          C,
        )[i],
        12,
      ),
    );
  });

  it('decode attention: the sampled heads equal the whole reference', () => {
    const [capacity, slot] = [10, 9];
    const d = {
      qkv: randomArray(B * W, 7),
      kCache: randomArray(B * capacity * NKV * HS, 8),
      vCache: randomArray(B * capacity * NKV * HS, 9),
      keyMask: Array.from({ length: B * capacity }, (_, i) => (i >= capacity && i < capacity + 3 ? 0 : 1)),
      B,
      NH,
      NKV,
      HS,
      capacity,
      slot,
      maskBatchStride: capacity,
      scale: 1 / Math.sqrt(HS),
    };
    const heads = [
      { b: 0, h: 2 },
      { b: 1, h: 0 },
    ];
    const at = heads.map(({ b, h }) => (b * NH + h) * HS);
    expect(rowsOf(decodeAttentionRef(d, heads).out, at, HS)).toEqual(rowsOf(decodeAttentionRef(d).out, at, HS));
  });
});
