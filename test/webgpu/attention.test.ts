import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import {
  attentionForward,
  attentionBackward,
  attentionMerge,
  type AttentionDims,
} from '../../kernels/attention/attention.ts';
import { attentionForwardRef, attentionBackwardRef } from '../../kernels/attention/attention.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { separateQkvDims } from '../support/attention-dims.ts';
import { Engine, readKnobs } from '../../engine/index.ts';

/** Row 1 left-padded by `pad` keys (a pad longer than the row pads all of it). */
function leftPaddedMask(B: number, Tk: number, pad: number, stride = Tk): Uint32Array {
  const mask = new Uint32Array(B * stride);
  for (let b = 0; b < B; b++) for (let j = 0; j < Tk; j++) mask[b * stride + j] = b === 1 && j < pad ? 0 : 1;
  return mask;
}

function fusedDims(B: number, T: number, NH: number, NKV: number, HS: number): AttentionDims {
  const W = (NH + 2 * NKV) * HS;
  return {
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
  };
}

/** Forward (and optionally backward) on the GPU against the float64 reference; q, k, v in one fused buffer. */
async function checkFused(engine: Engine, dims: AttentionDims, mask: Uint32Array, backward: boolean): Promise<void> {
  const { B, Tq, NH, HS } = dims;
  const W = dims.qRowStride;
  const qkvData = randomArray(B * Tq * W, 11 * Tq + HS, 2);
  const dOutData = randomArray(B * Tq * NH * HS, 13 * Tq + NH);
  const qkv = engine.tensorFrom('qkv', [B * Tq, W], qkvData);
  const keyMask = engine.tensorFrom('keyMask', [mask.length], mask, 'u32');
  const out = engine.tensor('out', [B * Tq, NH * HS]);
  const lse = engine.tensor('lse', [B, NH, Tq]);
  const before = engine.dispatchCount;
  attentionForward(engine, { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse });
  expect(engine.dispatchCount - before).toBe(1);
  const ref = attentionForwardRef({ ...dims, q: qkvData, k: qkvData, v: qkvData, keyMask: mask });
  expectClose(await engine.read(out), ref.out, 1e-5, 1e-4, 'out');
  expectClose(await engine.read(lse), ref.lse, 1e-5, 1e-5, 'lse');
  if (!backward) return;

  const dOut = engine.tensorFrom('dOut', [B * Tq, NH * HS], dOutData);
  // Poisoned, to see that every q, k and v element is overwritten.
  const dqkv = engine.tensorFrom('dqkv', [B * Tq, W], new Float32Array(B * Tq * W).fill(7));
  const args = { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse, dOut, dq: dqkv, dk: dqkv, dv: dqkv };
  const mid = engine.dispatchCount;
  attentionBackward(engine, args);
  expect(engine.dispatchCount - mid).toBe(3);
  const got = await engine.read(dqkv);
  const grads = attentionBackwardRef({ ...dims, q: qkvData, k: qkvData, v: qkvData, keyMask: mask, dOut: dOutData });
  expectClose(
    got,
    grads.dq.map((x, i) => x + grads.dk[i] + grads.dv[i]),
    1e-5,
    1e-4,
    'dqkv',
  );
  attentionBackward(engine, args);
  expect(Array.from(await engine.read(dqkv))).toEqual(Array.from(got));
}

/** Tq new queries of B=2 sequences against a KV cache of 45 keys (capacity 52, row 1 left-padded by 3). */
async function checkCacheDecode(engine: Engine, Tq: number, HS: number): Promise<void> {
  const [B, Tk, NH, NKV, capacity] = [2, 45, 4, 2, 52];
  const rowStride = NKV * HS;
  const dims = separateQkvDims({
    B,
    Tq,
    Tk,
    NH,
    NKV,
    HS,
    kvRows: capacity,
    queryStart: Tk - Tq,
    scale: 1 / Math.sqrt(HS),
    maskBatchStride: capacity,
  });
  const mask = leftPaddedMask(B, Tk, 3, capacity);
  const qData = randomArray(B * Tq * NH * HS, 5, 2);
  const kData = randomArray(B * capacity * rowStride, 6, 2);
  const vData = randomArray(B * capacity * rowStride, 7);
  const q = engine.tensorFrom('q', [qData.length], qData);
  const k = engine.tensorFrom('kCache', [kData.length], kData);
  const v = engine.tensorFrom('vCache', [vData.length], vData);
  const keyMask = engine.tensorFrom('keyMask', [B, capacity], mask, 'u32');
  const out = engine.tensor('out', [B * Tq, NH * HS]);
  const lse = engine.tensor('lse', [B, NH, Tq]);
  attentionForward(engine, { ...dims, q, k, v, keyMask, out, lse });
  const ref = attentionForwardRef({ ...dims, q: qData, k: kData, v: vData, keyMask: mask });
  expectClose(await engine.read(out), ref.out, 1e-5, 1e-4, 'out');
  expectClose(await engine.read(lse), ref.lse, 1e-5, 1e-5, 'lse');
}

/** `body` on an engine of its own with attention forced to `variant`. */
async function withVariant(variant: string, body: (engine: Engine) => Promise<void>): Promise<void> {
  const knobs = readKnobs();
  const engine = await Engine.create({ ...knobs, kernelVariants: { ...knobs.kernelVariants, attention: variant } });
  try {
    await body(engine);
  } finally {
    await engine.sync();
    engine.destroy();
  }
}

describe('attention kernel', () => {
  // Head sizes the rest of the suite compiles anyway (8 and 16: the model tests; 24: the default job's; 6: a partial
  // last vec4, so the tiled passes on CPU devices; 128: the largest). On CPU devices with subgroups of 8 one set of
  // register pipelines serves every head size that is a multiple of 4; on other devices each new head size is three
  // more pipelines for LLVM to compile on a cold cache.
  const cases: [T: number, NH: number, NKV: number, HS: number][] = [
    [1, 4, 2, 8],
    [5, 6, 1, 16],
    [37, 4, 4, 16],
    [70, 4, 2, 24],
    [70, 6, 1, 8],
    [37, 4, 2, 24],
    [20, 4, 2, 6],
    [20, 2, 1, 128],
  ];
  for (const [T, NH, NKV, HS] of cases) {
    it(
      `forward and backward match the reference: B=2 T=${T} NH/NKV=${NH}/${NKV} HS=${HS}, row 1 left-padded by ` + `3`,
      async () => {
        const engine = await gpuEngine();
        await checkFused(engine, fusedDims(2, T, NH, NKV, HS), leftPaddedMask(2, T, 3), true);
      },
    );
  }

  // Lavapipe runs the register passes, and the tiled ones with rolled loops where HS is not a multiple of 4
  // (kernels/attention/attention.ts): the GPUs' variant, tiled with unrolled loops, forced here at such a head size
  // (one more set of pipelines; its template is the same at every head size), is otherwise untested.
  it('the unrolled tiled variant matches the reference: B=2 T=37 NH/NKV=4/2 HS=6, row 1 left-padded by 3', async () => {
    await withVariant('unrolled', (engine) =>
      checkFused(engine, fusedDims(2, 37, 4, 2, 6), leftPaddedMask(2, 37, 3), true),
    );
  });

  // The GPUs' variant (split-head: 2 lanes a row at HS = 64, 4 at 128, rowSum's subgroup shuffles), forced on this
  // device: odd T (not a multiple of the 64-row blocks or of the tiles), GQA and causal masking with padding, and a
  // decode shape whose forward splits each query's keys over lanes (keySplit) as well. Heads up to 32 take one lane
  // a row, the unrolled variant's passes, tested above. Each head size is four pipelines for lavapipe to compile
  // (~15 s of CPU each set), so two.
  const splitHeadCases: [T: number, NH: number, NKV: number, HS: number][] = [
    [37, 4, 2, 64],
    [20, 2, 1, 128],
  ];
  for (const [T, NH, NKV, HS] of splitHeadCases) {
    it(
      `the split-head variant matches the reference: B=2 T=${T} NH/NKV=${NH}/${NKV} HS=${HS}, row 1 left-padded by ` +
        `3`,
      async () => {
        await withVariant('split-head', (engine) =>
          checkFused(engine, fusedDims(2, T, NH, NKV, HS), leftPaddedMask(2, T, 3), true),
        );
      },
    );
  }
  it('the split-head variant decodes Tq=3 new queries against a KV cache at HS=64', async () => {
    await withVariant('split-head', (engine) => checkCacheDecode(engine, 3, 64));
  });
  // A device with WebGPU's guaranteed 16 KiB of workgroup memory (this one has more; the launcher sizes its tiles
  // from the limit): HS = 128 takes 8-row tiles, and the decode forward's key split shrinks to what they can merge
  // (Tq = 6: 8 rows × 4 lanes, where 8 lanes would park 32 partial states in room for 16).
  it(
    'the split-head variant fits HS=128 in 16 KiB of workgroup memory: B=2 T=20 NH/NKV=2/1, and a Tq=6 ' + 'decode',
    async () => {
      await withVariant('split-head', async (engine) => {
        engine.caps.maxComputeWorkgroupStorageSize = 16384;
        await checkFused(engine, fusedDims(2, 20, 2, 1, 128), leftPaddedMask(2, 20, 3), true);
        await checkCacheDecode(engine, 6, 128);
      });
    },
  );

  // models/attention-windows.ts over key windows: 5 queries at positions 15–19 against 20 keys in windows [0, 6),
  // [6, 12), [12, 20), the first 7 keys masked (window 0 sees no key: the merge's "no key seen" path). The forward of
  // each window merged by attention/merge, and dq summed over the windows (accumulate), against float64 over all keys.
  it('key windows: forwards merged by their log-sum-exp and dq summed over windows equal attention over all keys', async () => {
    const engine = await gpuEngine();
    const [Tq, Tk, NH, NKV, HS, first] = [5, 20, 4, 2, 8, 15];
    const rowStride = NKV * HS;
    const dims = separateQkvDims({
      B: 1,
      Tq,
      Tk,
      NH,
      NKV,
      HS,
      kvRows: Tk,
      queryStart: first,
      scale: 1 / Math.sqrt(HS),
    });
    const mask = Uint32Array.from({ length: Tk }, (_, j) => (j < 7 ? 0 : 1));
    const qData = randomArray(Tq * NH * HS, 21, 2);
    const kData = randomArray(Tk * rowStride, 22, 2);
    const values = randomArray(Tk * rowStride, 23);
    const dOutData = randomArray(Tq * NH * HS, 24);
    const q = engine.tensorFrom('q', [qData.length], qData);
    const k = engine.tensorFrom('k', [kData.length], kData);
    const v = engine.tensorFrom('v', [values.length], values);
    const keyMask = engine.tensorFrom('keyMask', [Tk], mask, 'u32');
    const out = engine.tensor('out', [Tq, NH * HS]);
    const lse = engine.tensor('lse', [NH, Tq]);
    const partOut = engine.tensor('partOut', [Tq, NH * HS]);
    const partLse = engine.tensor('partLse', [NH, Tq]);
    const windows = [
      [0, 6],
      [6, 6],
      [12, 8],
    ];
    const windowArgs = (keyStart: number, rows: number) => ({
      ...dims,
      Tk: rows,
      queryStart: first - keyStart,
      kColOffset: keyStart * rowStride,
      vColOffset: keyStart * rowStride,
      q,
      k,
      v,
      keyMask: engine.tensorFrom(`keyMask[${keyStart}]`, [rows], mask.subarray(keyStart, keyStart + rows), 'u32'),
      keyWindow: true,
    });
    for (const [i, [keyStart, rows]] of windows.entries()) {
      const args = windowArgs(keyStart, rows);
      attentionForward(engine, { ...args, out: i === 0 ? out : partOut, lse: i === 0 ? lse : partLse });
      if (i > 0)
        attentionMerge(engine, {
          Tq,
          NH,
          HS,
          queryStart: first,
          keyStart,
          keyEnd: keyStart + rows,
          out,
          lse,
          partOut,
          partLse,
          keyMask,
        });
    }
    const ref = attentionForwardRef({ ...dims, q: qData, k: kData, v: values, keyMask: mask });
    expectClose(await engine.read(out), ref.out, 1e-5, 1e-4, 'out');
    expectClose(await engine.read(lse), ref.lse, 1e-5, 1e-5, 'lse');
    const dOut = engine.tensorFrom('dOut', [Tq, NH * HS], dOutData);
    // Poisoned: the first window overwrites dq, the others add to it.
    const dq = engine.tensorFrom('dq', [qData.length], new Float32Array(qData.length).fill(7));
    const scratch = engine.tensor('dkv', [kData.length]);
    for (const [i, [keyStart, rows]] of windows.entries())
      attentionBackward(engine, {
        ...windowArgs(keyStart, rows),
        out,
        lse,
        dOut,
        dq,
        dk: scratch,
        dv: scratch,
        passes: 'dq',
        accumulate: i > 0,
      });
    const grads = attentionBackwardRef({ ...dims, q: qData, k: kData, v: values, keyMask: mask, dOut: dOutData });
    expectClose(await engine.read(dq), grads.dq, 1e-5, 1e-4, 'dq');
  });

  it('reads q, k and v from separate tensors with their own strides', async () => {
    const engine = await gpuEngine();
    const [B, T, NH, NKV, HS] = [3, 9, 4, 2, 8];
    const dims: AttentionDims = {
      B,
      Tq: T,
      Tk: T,
      NH,
      NKV,
      HS,
      qRowStride: NH * HS + 4,
      qColOffset: 4,
      kRowStride: NKV * HS + 8,
      kColOffset: 0,
      vRowStride: NKV * HS + 8,
      vColOffset: 8,
      kvBatchStride: T * (NKV * HS + 8),
      queryStart: 0,
      scale: 0.3,
    };
    const mask = leftPaddedMask(B, T, 4);
    const qData = randomArray(B * T * dims.qRowStride, 1);
    const kData = randomArray(B * T * dims.kRowStride, 2);
    const vData = randomArray(B * T * dims.vRowStride, 3);
    const dOutData = randomArray(B * T * NH * HS, 4);
    const q = engine.tensorFrom('q', [qData.length], qData);
    const k = engine.tensorFrom('k', [kData.length], kData);
    const v = engine.tensorFrom('v', [vData.length], vData);
    const keyMask = engine.tensorFrom('keyMask', [B, T], mask, 'u32');
    const out = engine.tensor('out', [B * T, NH * HS]);
    const lse = engine.tensor('lse', [B, NH, T]);
    const dOut = engine.tensorFrom('dOut', [B * T, NH * HS], dOutData);
    const dq = engine.tensor('dq', [qData.length]);
    const dk = engine.tensor('dk', [kData.length]);
    const dv = engine.tensor('dv', [vData.length]);
    attentionForward(engine, { ...dims, q, k, v, keyMask, out, lse });
    attentionBackward(engine, { ...dims, q, k, v, keyMask, out, lse, dOut, dq, dk, dv });
    const refArgs = { ...dims, q: qData, k: kData, v: vData, keyMask: mask };
    expectClose(await engine.read(out), attentionForwardRef(refArgs).out, 1e-5, 1e-4, 'out');
    const grads = attentionBackwardRef({ ...refArgs, dOut: dOutData });
    expectClose(await engine.read(dq), grads.dq, 1e-5, 1e-4, 'dq');
    expectClose(await engine.read(dk), grads.dk, 1e-5, 1e-4, 'dk');
    expectClose(await engine.read(dv), grads.dv, 1e-5, 1e-4, 'dv');
  });

  for (const Tq of [1, 3]) {
    it(`decodes Tq=${Tq} new queries against a KV cache with capacity > Tk`, async () => {
      await checkCacheDecode(await gpuEngine(), Tq, 16);
    });
  }

  it('names the tensor and the expected size when a buffer is too small', async () => {
    const engine = await gpuEngine();
    const dims = fusedDims(2, 4, 4, 2, 8);
    const qkv = engine.tensor('qkv', [2 * 4, dims.qRowStride - 1]);
    const keyMask = engine.tensor('keyMask', [2, 4], 'u32');
    const out = engine.tensor('out', [8, 32]);
    const lse = engine.tensor('lse', [2, 4, 4]);
    expect(() => attentionForward(engine, { ...dims, q: qkv, k: qkv, v: qkv, keyMask, out, lse })).toThrow(
      /^attentionForward: v \(tensor qkv, shape \[8, 63\]\) has 504 elements, expected at least 512 = v\(b,j,g,d\)/,
    );
  });
});
