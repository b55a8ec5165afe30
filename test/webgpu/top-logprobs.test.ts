// kernels/decode/top-logprobs against its float64 reference: the K largest logits in rank order (ties by lowest
// index), their log-probs at each row's temperature (1 when greedy), written at each row's (outRow, step), and
// nothing written for a finished row or one past its budget.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { ROW_SAMPLING_WORDS, packRowSampling } from '../../kernels/decode/sample.ts';
import { topLogprobs, topLogprobsVariants } from '../../kernels/decode/top-logprobs.ts';
import { topLogprobsRef } from '../../kernels/decode/top-logprobs.ref.ts';
import { randomArray } from '../support/arrays.ts';

describe.each(topLogprobsVariants.map((v) => [v.name]))('top-logprobs (%s)', (variant) => {
  it('matches the reference: rank order with ties, per-row temperature, (outRow, step) addressing, skipped rows', async () => {
    const engine = await gpuEngine();
    engine.knobs.kernelVariants['top-logprobs'] = variant;
    const V = 300;
    const rows = 4;
    const K = 20;
    const outStride = 5;
    const logits = randomArray(rows * V, 7).map((x) => 4 * x);
    // Ties: row 1 has its largest value three times, and a tie further down.
    for (const v of [17, 3, 250]) logits[V + v] = 9;
    logits[V + 40] = logits[V + 41] = 5;
    const temperatures = [1, 0, 0.7, 1.3];
    const outRows = [2, 0, 3, 1];
    const steps = [0, 4, 2, 5];
    const finished = [0, 0, 0, 0];
    finished[2] = 1;
    const t = {
      logits: engine.tensorFrom('logits', [rows * V], logits),
      rowSampling: engine.tensorFrom(
        'rowSampling',
        [rows * ROW_SAMPLING_WORDS],
        temperatures.flatMap((temperature, r) =>
          packRowSampling({ temperature, topK: -1, topP: 1, seed: 1, stream: r, outRow: outRows[r] }),
        ),
        'u32',
      ),
      steps: engine.tensorFrom('steps', [rows], steps, 'u32'),
      finished: engine.tensorFrom('finished', [rows], finished, 'u32'),
      topIds: engine.tensorFrom('topIds', [rows * outStride * K], new Array(rows * outStride * K).fill(7), 'u32'),
      topLogprobs: engine.tensorFrom('topLogprobs', [rows * outStride * K], new Array(rows * outStride * K).fill(1)),
    };
    topLogprobs(engine, { ...t, V, rows, outStride, K });
    const ids = await engine.read(t.topIds);
    const lps = await engine.read(t.topLogprobs);
    const ref = topLogprobsRef(logits, V, rows, temperatures, K);
    expect(ref[1].ids.slice(0, 3)).toEqual([3, 17, 250]);
    for (let r = 0; r < rows; r++) {
      const at = (outRows[r] * outStride + steps[r]) * K;
      if (r === 2 || steps[r] >= outStride) continue;
      expect(Array.from(ids.subarray(at, at + K)), `row ${r}`).toEqual(ref[r].ids);
      ref[r].logprobs.forEach((lp, k) => expect(Math.abs(lps[at + k] - lp), `row ${r} k ${k}`).toBeLessThan(1e-5));
    }
    // Row 2 is finished and row 3 is past its budget: nothing written anywhere in their output rows.
    for (const r of [2, 3]) {
      const rowStart = outRows[r] * outStride * K;
      expect(Array.from(ids.subarray(rowStart, rowStart + outStride * K)).every((x) => x === 7)).toBe(true);
    }
    for (const x of Object.values(t)) engine.destroyTensor(x);
    delete engine.knobs.kernelVariants['top-logprobs'];
  });
});
