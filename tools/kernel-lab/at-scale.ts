// Kernels at a real model's shapes (Qwen3-0.6B: 16 query and 8 key/value heads of 128 over 2,048 tokens, hidden
// 1,024, a vocabulary of 151,936; a decode cache of 4,096 slots), each run once and checked against its CPU (float64)
// reference: where tiles, vocabulary chunks, binding windows and a decode's workgroup splits meet real sizes, which
// the benchmark model's small shapes never reach. test/gpu/kernels-at-scale.test.ts runs them on a hardware GPU and
// gpu-report's validate section after the benchmark cases (full report only: the references take seconds each).
import type { Engine, Tensor } from '../../engine/index.ts';
import { decodeAttention } from '../../kernels/decode/decode-attention.ts';
import { decodeAttentionRef } from '../../kernels/decode/decode-attention.ref.ts';
import { createSamplingTable, packRowSampling, sampleTokens, type RowSampling } from '../../kernels/decode/sample.ts';
import { sampleRef } from '../../kernels/decode/sample.ref.ts';
import { attentionCases } from './attention.bench.ts';
import { lmHeadCases } from './lm-head.bench.ts';
import {
  checkOutput,
  checkValues,
  randomValues,
  upload,
  type BenchCheck,
  type KernelBenchCase,
} from './bench-inputs.ts';

export const AT_SCALE = { T: 2048, NH: 16, NKV: 8, HS: 128, C: 1024, V: 151936, cache: 4096 } as const;

export function atScaleCases(): KernelBenchCase[] {
  const { T, NH, NKV, HS, C, V, cache } = AT_SCALE;
  return [
    // Two query heads on one key/value head: the float64 reference at all 16 took 272 s (forward alone, on the
    // shared 2-core VM), and heads only multiply the grid; T and HS set the tiles, the loops and workgroup memory.
    ...attentionCases({ B: 1, T, NH: 2, NKV: 1, HS }),
    // 16 rows: the reference's N·V·C products stay a few seconds; the kernel's chunks and windows are the same.
    ...lmHeadCases({ N: 16, C, V }),
    decodeAttentionCase({ B: 2, NH, NKV, HS, capacity: cache, slot: cache - 1 }),
    sampleCase(V),
  ];
}

/** One decode step's attention at the last slot of a full cache (the GPU variant splits it over workgroups), the
 *  second row left-padded over its first half. */
function decodeAttentionCase(c: {
  B: number;
  NH: number;
  NKV: number;
  HS: number;
  capacity: number;
  slot: number;
}): KernelBenchCase {
  const { B, NH, NKV, HS, capacity, slot } = c;
  const W = (NH + 2 * NKV) * HS;
  const cacheSize = B * capacity * NKV * HS;
  const qkv = randomValues(B * W, 21, 2);
  const kCache = randomValues(cacheSize, 22, 2);
  const vCache = randomValues(cacheSize, 23);
  const keyMask = Uint32Array.from({ length: B * capacity }, (_, i) => (i >= capacity && i < 1.5 * capacity ? 0 : 1));
  const args = { B, NH, NKV, HS, capacity, slot, maskBatchStride: capacity, scale: 1 / Math.sqrt(HS) };
  const reference = () => decodeAttentionRef({ ...args, qkv, kCache, vCache, keyMask });
  return {
    op: 'decode-attention',
    kernel: 'decode attention',
    shape: `B=${B},NH=${NH},NKV=${NKV},HS=${HS},slot ${slot} of ${capacity}`,
    reference,
    setup: (engine) => {
      const t = {
        qkv: upload(engine, 'decode-qkv', qkv),
        kCache: upload(engine, 'decode-k', kCache),
        vCache: upload(engine, 'decode-v', vCache),
        keyMask: engine.tensorFrom('bench-decode-mask', [keyMask.length], keyMask, 'u32'),
        out: engine.tensor('bench-decode-out', [B * NH * HS]),
      };
      return {
        run: () => decodeAttention(engine, { ...args, ...t }),
        check: () => checkOutput(engine, 'out', t.out, reference().out, 1e-5, 1e-4),
      };
    },
  };
}

/** One sampling step over a 151,936-token vocabulary: a greedy row, a temperature row, a top-p row and a top-k plus
 *  top-p row. A drawn token passes when it is the reference's, or its reference score (logit/T + Gumbel noise) ties
 *  the best within 1e-4 (float32 against float64); its log-prob is then compared. */
function sampleCase(V: number): KernelBenchCase {
  const rowSampling: RowSampling[] = [
    { temperature: 0, topK: -1, topP: 1 },
    { temperature: 1, topK: -1, topP: 1 },
    { temperature: 0.7, topK: -1, topP: 0.9 },
    { temperature: 1.2, topK: 50, topP: 0.8 },
  ].map((s, r) => ({ ...s, seed: 11, stream: r, outRow: r }));
  const rows = rowSampling.length;
  const logits = randomValues(rows * V, 24, 8);
  const steps = Array.from({ length: rows }, (_, r) => 1 + r);
  const finished = new Array<number>(rows).fill(0);
  const reference = () => sampleRef({ logits, V, rows, eosIds: [], rowSampling, steps, padId: 0, finished });
  const outStride = 8;
  return {
    op: 'sample',
    kernel: 'sample',
    shape: `rows=${rows},V=${V}`,
    reference,
    setup: (engine) => {
      const logitsTensor = upload(engine, 'sample-logits', logits);
      const sampling = createSamplingTable(engine, 'bench-sampling', rows, []);
      engine.upload(sampling.rowSampling, rowSampling.flatMap(packRowSampling));
      const t = {
        ids: engine.tensor('bench-sample-ids', [rows], 'u32'),
        positions: engine.tensor('bench-sample-positions', [rows], 'i32'),
        steps: engine.tensor('bench-sample-steps', [rows], 'u32'),
        finished: engine.tensor('bench-sample-finished', [rows], 'u32'),
        tokens: engine.tensor('bench-sample-tokens', [rows, outStride], 'u32'),
        logprobs: engine.tensor('bench-sample-logprobs', [rows, outStride]),
      };
      // Each run samples from the same state: the kernel advances steps and positions.
      const run = () => {
        engine.upload(t.steps, steps);
        engine.upload(t.finished, finished);
        sampleTokens(engine, { logits: logitsTensor, V, rows, sampling, ...t, outStride, padId: 0 });
      };
      return { run, check: () => checkDraws(engine, t.ids, t.logprobs, outStride, steps, reference()) };
    },
  };
}

async function checkDraws(
  engine: Engine,
  idsTensor: Tensor,
  logprobsTensor: Tensor,
  outStride: number,
  steps: readonly number[],
  ref: ReturnType<typeof sampleRef>,
): Promise<BenchCheck> {
  const ids = await engine.read(idsTensor);
  const written = await engine.read(logprobsTensor);
  const got: number[] = [];
  const expected: number[] = [];
  for (let r = 0; r < ids.length; r++) {
    const s = ref.scores[r];
    // A greedy row has no scores: its token must be the argmax itself.
    const tie = ids[r] !== ref.ids[r] && s.length > 0 && s[ref.ids[r]] - s[ids[r]] < 1e-4;
    if (ids[r] !== ref.ids[r] && !tie)
      return {
        output: `token of row ${r}`,
        violation: Infinity,
        maxAbsError: Math.abs(ids[r] - ref.ids[r]),
        tolerance: `the reference's ${ref.ids[r]} or a tie within 1e-4, got ${ids[r]}`,
      };
    if (ids[r] === ref.ids[r]) {
      got.push(written[r * outStride + steps[r]]);
      expected.push(ref.logprobs[r]);
    }
  }
  return checkValues('logprobs', got, expected, 1e-4, 1e-4);
}
