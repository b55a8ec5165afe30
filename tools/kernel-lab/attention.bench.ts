// Bench cases of attention for `node tools/bench.js kernels` (tools/bench/kernels.ts runs them).
import type { Engine } from '../../engine/index.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../../kernels/attention/attention.ts';
import { attentionForwardRef, attentionBackwardRef } from '../../kernels/attention/attention.ref.ts';
import {
  MODEL,
  B as BATCH,
  T as TOKENS,
  checkOutput,
  checkOutputs,
  randomValues,
  upload,
  type KernelBenchCase,
} from './bench-inputs.ts';

/** Causal grouped-query attention over the fused qkv rows, as the trunk calls it (no padding). FLOPs are the
 *  causal QKᵀ and PV products; the backward counts twice the forward's (dQ, dK, dV, dP), not its recomputation.
 *  At the benchmark model's shape unless given another (tools/kernel-lab/at-scale.ts). */
export function attentionCases(
  { B, T, NH, NKV, HS } = { B: BATCH, T: TOKENS, NH: MODEL.numHeads, NKV: MODEL.numKvHeads, HS: MODEL.headDim },
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
  const forward = (engine: Engine) => {
    const t = { q: upload(engine, 'qkv', qkv), keyMask: engine.tensorFrom('bench-keyMask', [B * T], keyMask, 'u32') };
    const out = engine.tensor('bench-out', [ROWS * NH * HS]);
    const lse = engine.tensor('bench-lse', [B * NH * T]);
    const args = { ...dims, q: t.q, k: t.q, v: t.q, keyMask: t.keyMask, out, lse };
    const run = () => attentionForward(engine, args);
    const check = () => {
      const expected = attentionForwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask });
      return checkOutputs(engine, [
        ['out', out, expected.out, 1e-5, 1e-4],
        ['lse', lse, expected.lse, 1e-5, 1e-4],
      ]);
    };
    return { args, run, check };
  };
  return [
    {
      op: 'attention',
      kernel: 'attention forward',
      shape,
      flops: forwardFlops,
      reference: () => attentionForwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask }),
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
      reference: () => attentionBackwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask, dOut }),
      setup: (engine) => {
        const { args, run } = forward(engine);
        run();
        const dQkv = engine.tensor('bench-dQkv', [ROWS * W]);
        const dOutTensor = upload(engine, 'dOut', dOut);
        return {
          run: () => attentionBackward(engine, { ...args, dOut: dOutTensor, dq: dQkv, dk: dQkv, dv: dQkv }),
          check: () => {
            // dq, dk and dv are column blocks of the one fused dQkv.
            const { dq, dk, dv } = attentionBackwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask, dOut });
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
