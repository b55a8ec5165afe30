// Bench cases of attention for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import type { Engine } from '../../engine/index.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../../kernels/attention/attention.ts';
import {
  attentionForwardRef,
  attentionBackwardRef,
  attentionBackwardAtRef,
  type AttentionKey,
  type AttentionQuery,
} from '../../kernels/attention/attention.ref.ts';
import {
  MODEL,
  B as BATCH,
  T as TOKENS,
  checkOutput,
  checkOutputs,
  checkRows,
  checkValues,
  randomValues,
  sampleIndices,
  upload,
  worstCheck,
  type KernelBenchCase,
  type KernelCheck,
} from './bench-inputs.ts';

/** Query rows and key rows a sampled check recomputes, each over the whole key (query) range. */
const SAMPLED_ROWS = 32;

/** Causal grouped-query attention over the fused qkv rows, as the trunk calls it (no padding). FLOPs are the
 *  causal QKᵀ and PV products; the backward counts twice the forward's (dQ, dK, dV, dP), not its recomputation.
 *  At the benchmark model's shape unless given another (tools/kernel-lab/at-scale.ts), which may check a sample. */
export function attentionCases(
  { B, T, NH, NKV, HS } = { B: BATCH, T: TOKENS, NH: MODEL.numHeads, NKV: MODEL.numKvHeads, HS: MODEL.headDim },
  kernelCheck: KernelCheck = 'full',
): KernelBenchCase[] {
  const ROWS = B * T;
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
    scale: 1 / Math.sqrt(HS),
  };
  const qkv = randomValues(ROWS * W, 12);
  const keyMask = new Uint32Array(B * T).fill(1);
  const dOut = randomValues(ROWS * NH * HS, 13);
  const forwardFlops = 2 * 2 * B * NH * HS * ((T * (T + 1)) / 2);
  const shape = `B=${B},T=${T},NH=${NH},NKV=${NKV},HS=${HS}`;
  const queries = sampleIndices(B * NH * T, SAMPLED_ROWS, 14).map(
    (i): AttentionQuery => ({ b: Math.floor(i / (NH * T)), h: Math.floor(i / T) % NH, t: i % T }),
  );
  const keys = sampleIndices(B * NKV * T, SAMPLED_ROWS, 15).map(
    (i): AttentionKey => ({ b: Math.floor(i / (NKV * T)), g: Math.floor(i / T) % NKV, j: i % T }),
  );
  // Where each sampled row sits in out [B·T, NH·HS] and in the fused dQkv [B·T, W] (dq, dk, dv column blocks).
  const sampled = {
    queries,
    keys,
    outAt: queries.map(({ b, t, h }) => ((b * T + t) * NH + h) * HS),
    dqAt: queries.map(({ b, t, h }) => (b * T + t) * W + h * HS),
    dkAt: keys.map(({ b, j, g }) => (b * T + j) * W + (NH + g) * HS),
    dvAt: keys.map(({ b, j, g }) => (b * T + j) * W + (NH + NKV + g) * HS),
  };
  const forward = (engine: Engine) => {
    const t = { q: upload(engine, 'qkv', qkv), keyMask: engine.tensorFrom('bench-keyMask', [B * T], keyMask, 'u32') };
    const out = engine.tensor('bench-out', [ROWS * NH * HS]);
    const lse = engine.tensor('bench-lse', [B * NH * T]);
    const args = { ...dims, q: t.q, k: t.q, v: t.q, keyMask: t.keyMask, out, lse };
    const run = () => attentionForward(engine, args);
    const check = async () => {
      if (kernelCheck === 'sampled') {
        const expected = attentionForwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask }, sampled.queries);
        const [gotOut, gotLse] = [await engine.read(out), await engine.read(lse)];
        const lseAt = sampled.queries.map(({ b, t, h }) => (b * NH + h) * T + t);
        return worstCheck([
          checkRows(
            'out',
            gotOut,
            sampled.outAt,
            sampled.outAt.map((o) => expected.out.subarray(o, o + HS)),
            1e-5,
            1e-4,
          ),
          checkValues(
            'lse',
            Array.from(lseAt, (i) => gotLse[i]),
            Array.from(lseAt, (i) => expected.lse[i]),
            1e-5,
            1e-4,
          ),
        ]);
      }
      const expected = attentionForwardExpected();
      return checkOutputs(engine, [
        ['out', out, expected.out, 1e-5, 1e-4],
        ['lse', lse, expected.lse, 1e-5, 1e-4],
      ]);
    };
    return { args, run, check };
  };
  const attentionForwardExpected = () => attentionForwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask });
  const attentionBackwardExpected = () => attentionBackwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask, dOut });
  return [
    {
      op: 'attention',
      kernel: 'attention forward',
      shape,
      flops: forwardFlops,
      reference: attentionForwardExpected,
      setup: (engine) => {
        const { run, check } = forward(engine);
        return { run, check };
      },
    },
    {
      op: 'attention',
      kernel: 'attention backward',
      shape,
      flops: 2 * forwardFlops,
      reference: attentionBackwardExpected,
      setup: (engine) => {
        const { args, run } = forward(engine);
        run();
        const dQkv = engine.tensor('bench-dQkv', [ROWS * W]);
        const dOutTensor = upload(engine, 'dOut', dOut);
        return {
          run: () => attentionBackward(engine, { ...args, dOut: dOutTensor, dq: dQkv, dk: dQkv, dv: dQkv }),
          check: async () => {
            if (kernelCheck === 'sampled') {
              const got = await engine.read(dQkv);
              const expected = attentionBackwardAtRef(
                {
                  ...dims,
                  q: qkv,
                  k: qkv,
                  v: qkv,
                  keyMask,
                  dOut,
                  out: await engine.read(args.out),
                  lse: await engine.read(args.lse),
                },
                sampled,
              );
              return worstCheck([
                checkRows('dq', got, sampled.dqAt, expected.dq, 1e-5, 1e-4),
                checkRows('dk', got, sampled.dkAt, expected.dk, 1e-5, 1e-4),
                checkRows('dv', got, sampled.dvAt, expected.dv, 1e-5, 1e-4),
              ]);
            }
            // dq, dk and dv are column blocks of the one fused dQkv.
            const { dq, dk, dv } = attentionBackwardExpected();
            return checkOutput(
              engine,
              'dQkv',
              dQkv,
              dq.map((x, i) => x + dk[i] + dv[i]),
              1e-5,
              1e-4,
            );
          },
        };
      },
    },
  ];
}
