import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { Tensor, type Engine } from '../../engine/index.ts';
import {
  createSamplingTable,
  packRowSampling,
  sampleTokens,
  sampleVariants,
  type RowSampling,
  type SamplingParams,
} from '../../kernels/decode/sample.ts';
import { sampleRef, keptTokens } from '../../kernels/decode/sample.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';

interface Case extends SamplingParams {
  logits: Float32Array;
  V: number;
  rows: number;
  rowStride?: number;
  rowOffset?: number;
  eosIds?: number[];
  finished?: number[];
  /** Per row, the random stream and output row (default r). */
  sampleIds?: number[];
  /** Per row, sampling parameters that replace the case's (rows of different requests in one batch). */
  perRow?: Partial<SamplingParams>[];
  /** Per row; default 1 + r % 3 (rows at different steps, as after a continuous-batching refill). */
  steps?: number[];
  outStride?: number;
  /** Sampled rows per buffer: the logits split across buffers (logits windows), sampled window by window. */
  rowsPerPart?: number;
}

/** The case's logits in one buffer, or in buffers of `rowsPerPart` sampled rows (each rowStride·V floats) each. */
function logitsTensor(engine: Engine, c: Case): Tensor {
  if (!c.rowsPerPart) return engine.tensorFrom('logits', [c.logits.length], c.logits);
  const perPart = c.rowsPerPart * (c.rowStride ?? 1) * c.V;
  const parts = [];
  for (let at = 0; at < c.logits.length; at += perPart) {
    const values = c.logits.subarray(at, at + perPart);
    parts.push(engine.tensorFrom(`logits.rows${at / perPart}`, [values.length], values));
  }
  return Tensor.split('logits', [c.logits.length], parts);
}

async function runGpu(engine: Engine, c: Case) {
  const { rows } = c;
  const outStride = c.outStride ?? 4;
  const eos = c.eosIds ?? [];
  const finishedIn = c.finished ?? new Array<number>(rows).fill(0);
  const t = {
    logits: logitsTensor(engine, c),
    sampling: createSamplingTable(engine, 'sampling', rows, eos),
    ids: engine.tensor('ids', [rows], 'u32'),
    positions: engine.tensorFrom(
      'positions',
      [rows],
      Array.from({ length: rows }, (_, r) => 10 + r),
      'i32',
    ),
    steps: engine.tensorFrom('steps', [rows], stepsOf(c), 'u32'),
    finished: engine.tensorFrom('finished', [rows], finishedIn, 'u32'),
    tokens: engine.tensor('tokens', [rows, outStride], 'u32'),
    logprobs: engine.tensor('logprobs', [rows, outStride]),
  };
  engine.upload(t.sampling.rowSampling, rowSamplingOf(c).flatMap(packRowSampling));
  sampleTokens(engine, { ...c, ...t, outStride, padId: 3 });
  const out = {
    ids: await engine.read(t.ids),
    positions: await engine.read(t.positions),
    steps: await engine.read(t.steps),
    finished: await engine.read(t.finished),
    tokens: await engine.read(t.tokens),
    logprobs: await engine.read(t.logprobs),
  };
  const { sampling, ...tensors } = t;
  for (const tensor of [...Object.values(tensors), sampling.table]) engine.destroyTensor(tensor);
  return out;
}

function rowSamplingOf(c: Case): RowSampling[] {
  const { temperature, topK, topP, seed } = c;
  return Array.from({ length: c.rows }, (_, r) => {
    const sample = c.sampleIds?.[r] ?? r;
    return { temperature, topK, topP, seed, ...c.perRow?.[r], stream: sample, outRow: sample };
  });
}

function stepsOf(c: Case): number[] {
  return c.steps ?? Array.from({ length: c.rows }, (_, r) => 1 + (r % 3));
}

function reference(c: Case) {
  return sampleRef({
    ...c,
    eosIds: c.eosIds ?? [],
    steps: stepsOf(c),
    padId: 3,
    finished: c.finished ?? new Array<number>(c.rows).fill(0),
    rowSampling: rowSamplingOf(c),
  });
}

/** Same token as the reference, or (f32 vs f64 rounding) one whose reference score ties the best within 1e-4. */
function expectSameDraw(got: ArrayLike<number>, ref: ReturnType<typeof reference>): void {
  for (let r = 0; r < got.length; r++) {
    if (got[r] === ref.ids[r]) continue;
    const s = ref.scores[r];
    expect(s.length, `row ${r}: greedy token ${got[r]} vs ${ref.ids[r]}`).toBeGreaterThan(0);
    expect(s[ref.ids[r]] - s[got[r]], `row ${r}: token ${got[r]} vs reference ${ref.ids[r]}`).toBeLessThan(1e-4);
  }
}

describe('sample kernel', () => {
  it.each(sampleVariants.map((v) => v.name))(
    '%s matches the reference: greedy, temperature, top-k, top-p; odd V, strided rows, eos, finished rows',
    async (variant) => {
      const engine = await gpuEngine();
      engine.knobs.kernelVariants.sample = variant;
      const cases: Case[] = [];
      for (const V of [37, 1000]) {
        const rows = 5;
        // permuted sample ids: rows of a compacted batch write to their own samples' output rows
        const base = {
          V,
          rows,
          seed: 1234,
          eosIds: [2, 7],
          finished: [0, 0, 1, 0, 0],
          sampleIds: V > 100 ? [3, 0, 4, 1, 2] : undefined,
        };
        const logits = randomArray(rows * V, V, 3);
        cases.push({ ...base, logits, temperature: 0, topK: -1, topP: 1 });
        cases.push({ ...base, logits, temperature: 1, topK: -1, topP: 1 });
        cases.push({ ...base, logits, temperature: 0.6, topK: 5, topP: 1 });
        cases.push({ ...base, logits, temperature: 1.3, topK: -1, topP: 0.7 });
        cases.push({ ...base, logits, temperature: 0.9, topK: 12, topP: 0.8 });
        cases.push({ ...base, logits, temperature: 1, topK: 1, topP: 1 });
        // ten ids that finish a row (an environment's turn-ending ids), more than a quarter of V = 37
        cases.push({ ...base, logits, temperature: 1, topK: -1, topP: 1, eosIds: [12, 11, 10, 9, 8, 7, 6, 5, 4, 3] });
      }
      // rows of different requests in one batch: each its own temperature, top-k, top-p and seed
      cases.push({
        V: 300,
        rows: 4,
        logits: randomArray(4 * 300, 31, 3),
        temperature: 1,
        topK: -1,
        topP: 1,
        seed: 8,
        perRow: [
          { temperature: 0 },
          { temperature: 0.7, topK: 9, seed: 40 },
          { topP: 0.6, seed: 41 },
          { temperature: 1.4, topK: 30, topP: 0.9 },
        ],
      });
      // rows of a (B, T, V) batch: each row samples at its last position (the no-cache path)
      cases.push({
        V: 50,
        rows: 3,
        rowStride: 4,
        rowOffset: 3,
        logits: randomArray(3 * 4 * 50, 9, 2),
        temperature: 0.8,
        topK: -1,
        topP: 0.95,
        seed: 5,
      });
      cases.push({
        V: 50,
        rows: 3,
        rowStride: 4,
        rowOffset: 3,
        logits: randomArray(3 * 4 * 50, 9, 2),
        temperature: 0,
        topK: -1,
        topP: 1,
        seed: 5,
      });
      for (const c of cases) {
        const got = await runGpu(engine, c);
        const ref = reference(c);
        const what = `V=${c.V} T=${c.temperature} k=${c.topK} p=${c.topP}`;
        expectSameDraw(got.ids, ref);
        const outStride = c.outStride ?? 4;
        for (let r = 0; r < c.rows; r++) {
          const at = (c.sampleIds?.[r] ?? r) * outStride + stepsOf(c)[r];
          expect(got.tokens[at], what).toBe(got.ids[r]);
          const done = ref.finished[r] === 1 && (c.finished?.[r] ?? 0) === 1;
          expect(got.positions[r], what).toBe(10 + r + (done ? 0 : 1));
          expect(got.steps[r], what).toBe(stepsOf(c)[r] + (done ? 0 : 1));
          if (got.ids[r] === ref.ids[r]) {
            expect(got.finished[r], what).toBe(ref.finished[r]);
            expectClose([got.logprobs[at]], [ref.logprobs[r]], 1e-5, 1e-5, `${what} logprob row ${r}`);
          }
        }
      }
      delete engine.knobs.kernelVariants.sample;
    },
  );

  it('logits split across buffers (windows of rows, one dispatch each) give the draws of one tensor, bit for bit', async () => {
    const engine = await gpuEngine();
    const perRow = [
      { temperature: 0 },
      { temperature: 0.7, topK: 9, seed: 40 },
      { topP: 0.6, seed: 41 },
      { temperature: 1.4, topK: 30, topP: 0.9 },
      { temperature: 1, seed: 3 },
      { temperature: 0.5, topP: 0.8 },
      { temperature: 1.1, topK: 4 },
    ];
    const base = { V: 300, rows: 7, temperature: 1, topK: -1, topP: 1, seed: 8, perRow, eosIds: [2, 7] };
    const cases: Case[] = [
      {
        ...base,
        logits: randomArray(7 * 300, 32, 3),
        sampleIds: [3, 0, 6, 1, 2, 5, 4],
        finished: [0, 0, 1, 0, 0, 0, 0],
      },
      { ...base, rowStride: 2, rowOffset: 1, logits: randomArray(7 * 2 * 300, 33, 3) },
    ];
    for (const c of cases) {
      const dispatches = engine.dispatchCount;
      const one = await runGpu(engine, c);
      expect(engine.dispatchCount - dispatches).toBe(1);
      const windows = engine.dispatchCount;
      const split = await runGpu(engine, { ...c, rowsPerPart: 3 });
      // 3 + 3 + 1 rows.
      expect(engine.dispatchCount - windows).toBe(3);
      expect(split).toEqual(one);
      expectSameDraw(split.ids, reference(c));
    }
  });

  it('draws at temperature 1 follow the softmax (χ² test) and are reproducible from the seed', async () => {
    const engine = await gpuEngine();
    const V = 10;
    const rows = 2048;
    const row = randomArray(V, 17, 1.5);
    const logits = new Float32Array(rows * V);
    for (let r = 0; r < rows; r++) logits.set(row, r * V);
    const c: Case = { V, rows, logits, temperature: 1, topK: -1, topP: 1, seed: 77 };
    const counts = new Array<number>(V).fill(0);
    const first = await runGpu(engine, c);
    for (const id of first.ids) counts[id]++;
    const second = await runGpu(engine, { ...c, steps: new Array<number>(rows).fill(2) });
    for (const id of second.ids) counts[id]++;
    const max = Math.max(...row);
    const w = Array.from(row, (x) => Math.exp(x - max));
    const total = w.reduce((s, x) => s + x, 0);
    let chi = 0;
    w.forEach((x, v) => {
      const expected = (x / total) * 2 * rows;
      chi += (counts[v] - expected) ** 2 / expected;
    });
    // 9 degrees of freedom: 27.9 is the 0.999 quantile.
    expect(chi).toBeLessThan(27.9);
    expect(Array.from((await runGpu(engine, c)).ids)).toEqual(Array.from(first.ids));
    const reseeded = await runGpu(engine, { ...c, seed: 78 });
    expect(Array.from(reseeded.ids)).not.toEqual(Array.from(first.ids));
  });

  it('top-k and top-p never emit an excluded token', async () => {
    const engine = await gpuEngine();
    const V = 300;
    const rows = 512;
    const row = randomArray(V, 23, 2);
    row[17] = row[40]; // a tie, to exercise the tie rule at the thresholds
    const logits = new Float32Array(rows * V);
    for (let r = 0; r < rows; r++) logits.set(row, r * V);
    for (const [temperature, topK, topP] of [
      [1, 10, 1],
      [0.7, -1, 0.5],
      [1.5, 40, 0.9],
      [1, 3, 0.3],
    ]) {
      const kept = keptTokens(row, temperature, topK, topP);
      const got = await runGpu(engine, { V, rows, logits, temperature, topK, topP, seed: 3 });
      const seen = new Set(got.ids);
      for (const id of seen) expect(kept[id], `T=${temperature} k=${topK} p=${topP}: token ${id} excluded`).toBe(1);
      // and the kept set is used, not just its top token
      if (kept.reduce((n, k) => n + k, 0) > 1) expect(seen.size).toBeGreaterThan(1);
    }
  });

  it('a row whose step reached outStride has spent its budget: pad, no write, no advance', async () => {
    const engine = await gpuEngine();
    const V = 16;
    const got = await runGpu(engine, {
      V,
      rows: 2,
      logits: randomArray(2 * V, 4, 1),
      temperature: 1,
      topK: -1,
      topP: 1,
      seed: 9,
      steps: [4, 3],
      outStride: 4,
    });
    expect(got.ids[0]).toBe(3);
    expect(Array.from(got.steps)).toEqual([4, 4]);
    expect(Array.from(got.positions)).toEqual([10, 12]);
    expect(got.tokens[4 + 3]).toBe(got.ids[1]);
    expect(Array.from(got.tokens.subarray(0, 4))).toEqual([0, 0, 0, 0]);
  });
});
