// kernels/decode/prompt-logprobs against its float64 reference: each position's next-token log-prob and rank (ties
// do not count against it), its K alternatives in rank order, written at rowOffset + row so that chunks of a long
// prompt fill one output; K = 0 writes no alternatives; the log-probs of M given tokens (repeats allowed) land in each
// chunk's own (rows, M) output, at temperature 1 and at 0.5 (invTemperature 2) for every output.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { promptLogprobs, promptLogprobsVariants } from '../../kernels/decode/prompt-logprobs.ts';
import { promptLogprobsRef } from '../../kernels/decode/prompt-logprobs.ref.ts';
import { randomArray } from '../support/arrays.ts';

describe.each(promptLogprobsVariants.map((v) => [v.name]))('prompt-logprobs (%s)', (variant) => {
  it('matches the reference in two chunks: log-prob, rank with ties, top-K in rank order', async () => {
    const engine = await gpuEngine();
    engine.knobs.kernelVariants['prompt-logprobs'] = variant;
    const V = 300;
    const N = 6;
    const K = 20;
    const logits = randomArray(N * V, 11).map((x) => 4 * x);
    // Position 1's target ties with two larger-ranked tokens at the top; position 4's target is the largest.
    for (const v of [17, 3, 250]) logits[V + v] = 9;
    const targets = [5, 250, 99, 0, 42, 7];
    logits[4 * V + 42] = 20;
    const t = {
      targets: engine.tensorFrom('targets', [N], targets, 'u32'),
      tokenLogprobs: engine.tensorFrom('tokenLogprobs', [N], new Array(N).fill(1)),
      ranks: engine.tensorFrom('ranks', [N], new Array(N).fill(0), 'u32'),
      topIds: engine.tensorFrom('topIds', [N * K], new Array(N * K).fill(7), 'u32'),
      topLogprobs: engine.tensorFrom('topLogprobs', [N * K], new Array(N * K).fill(1)),
    };
    const gather = [250, 0, 42, 250, V - 1];
    const M = gather.length;
    const gatherIds = engine.tensorFrom('gatherIds', [M], gather, 'u32');
    const gathered: Float32Array[] = [];
    // Two chunks: positions [0, 4) then [4, 6), each its own logits tensor.
    for (const [from, to] of [
      [0, 4],
      [4, 6],
    ]) {
      const chunk = engine.tensorFrom('logits', [(to - from) * V], logits.slice(from * V, to * V));
      const out = engine.tensor('gathered', [(to - from) * M]);
      const gatheredArgs = { gatherIds, gathered: out, M, invTemperature: 1 };
      promptLogprobs(engine, { ...t, ...gatheredArgs, logits: chunk, V, rows: to - from, rowOffset: from, K });
      engine.flush();
      gathered.push(await engine.read(out));
      engine.destroyTensor(chunk);
      engine.destroyTensor(out);
    }
    const lps = await engine.read(t.tokenLogprobs);
    const ranks = await engine.read(t.ranks);
    const ids = await engine.read(t.topIds);
    const topLps = await engine.read(t.topLogprobs);
    const ref = promptLogprobsRef(logits, V, targets, K, gather);
    const allGathered = [...gathered[0], ...gathered[1]];
    expect(ref[1].rank).toBe(1);
    expect(ref[4].rank).toBe(1);
    expect(ref.some((r) => r.rank > 50)).toBe(true);
    for (let p = 0; p < N; p++) {
      expect(Math.abs(lps[p] - ref[p].logprob), `position ${p}`).toBeLessThan(1e-5);
      expect(ranks[p], `position ${p}`).toBe(ref[p].rank);
      expect(Array.from(ids.subarray(p * K, p * K + K)), `position ${p}`).toEqual(ref[p].ids);
      ref[p].logprobs.forEach((lp, k) => expect(Math.abs(topLps[p * K + k] - lp)).toBeLessThan(1e-5));
      ref[p].gathered.forEach((lp, j) => expect(Math.abs(allGathered[p * M + j] - lp)).toBeLessThan(1e-5));
    }
    expect(allGathered[4 * M + 2]).toBeGreaterThan(-1e-3);
    // K = 0: log-probs and ranks only; the alternatives' buffers are untouched.
    // M = 0: nothing gathered.
    const untouched = engine.tensorFrom('topIds0', [1], [7], 'u32');
    const notGathered = engine.tensorFrom('gathered0', [1], [3]);
    const whole = engine.tensorFrom('logits', [N * V], logits);
    const none = { gatherIds, gathered: notGathered, M: 0, invTemperature: 1 };
    promptLogprobs(engine, { ...t, ...none, logits: whole, V, rows: N, rowOffset: 0, K: 0, topIds: untouched });
    expect(Array.from(await engine.read(untouched))).toEqual([7]);
    expect(Array.from(await engine.read(notGathered))).toEqual([3]);
    expect(Array.from(await engine.read(t.ranks))).toEqual(ref.map((r) => r.rank));
    // At temperature 0.5: the target's, the alternatives' and the gathered log-probs are log_softmax(2·logits).
    const hot = promptLogprobsRef(logits, V, targets, K, gather, 2);
    const out = engine.tensor('gathered', [N * M]);
    promptLogprobs(engine, {
      ...t,
      logits: whole,
      V,
      rows: N,
      rowOffset: 0,
      K,
      gatherIds,
      gathered: out,
      M,
      invTemperature: 2,
    });
    const [hotLps, hotTop, hotGathered] = await Promise.all([
      engine.read(t.tokenLogprobs),
      engine.read(t.topLogprobs),
      engine.read(out),
    ]);
    for (let p = 0; p < N; p++) {
      expect(Math.abs(hotLps[p] - hot[p].logprob), `position ${p} at 0.5`).toBeLessThan(1e-5);
      // Position 4's target dominates: its log-prob is ~0 at any temperature.
      if (p !== 4) expect(Math.abs(hotLps[p] - ref[p].logprob), `position ${p} at 0.5`).toBeGreaterThan(1e-3);
      hot[p].logprobs.forEach((lp, k) => expect(Math.abs(hotTop[p * K + k] - lp)).toBeLessThan(1e-5));
      hot[p].gathered.forEach((lp, j) => expect(Math.abs(hotGathered[p * M + j] - lp)).toBeLessThan(1e-5));
    }
    for (const x of [...Object.values(t), untouched, notGathered, whole, gatherIds, out]) engine.destroyTensor(x);
    delete engine.knobs.kernelVariants['prompt-logprobs'];
  });
});
