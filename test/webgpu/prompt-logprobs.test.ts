// kernels/decode/prompt-logprobs against its float64 reference: each position's next-token log-prob and rank (ties
// do not count against it), its K alternatives in rank order, written at rowOffset + row so that chunks of a long
// prompt fill one output; K = 0 writes no alternatives.
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
    // Two chunks: positions [0, 4) then [4, 6), each its own logits tensor.
    for (const [from, to] of [
      [0, 4],
      [4, 6],
    ]) {
      const chunk = engine.tensorFrom('logits', [(to - from) * V], logits.slice(from * V, to * V));
      promptLogprobs(engine, { ...t, logits: chunk, V, rows: to - from, rowOffset: from, K });
      engine.flush();
      await engine.read(t.ranks);
      engine.destroyTensor(chunk);
    }
    const lps = await engine.read(t.tokenLogprobs);
    const ranks = await engine.read(t.ranks);
    const ids = await engine.read(t.topIds);
    const topLps = await engine.read(t.topLogprobs);
    const ref = promptLogprobsRef(logits, V, targets, K);
    expect(ref[1].rank).toBe(1);
    expect(ref[4].rank).toBe(1);
    expect(ref.some((r) => r.rank > 50)).toBe(true);
    for (let p = 0; p < N; p++) {
      expect(Math.abs(lps[p] - ref[p].logprob), `position ${p}`).toBeLessThan(1e-5);
      expect(ranks[p], `position ${p}`).toBe(ref[p].rank);
      expect(Array.from(ids.subarray(p * K, p * K + K)), `position ${p}`).toEqual(ref[p].ids);
      ref[p].logprobs.forEach((lp, k) => expect(Math.abs(topLps[p * K + k] - lp)).toBeLessThan(1e-5));
    }
    // K = 0: log-probs and ranks only; the alternatives' buffers are untouched.
    const untouched = engine.tensorFrom('topIds0', [1], [7], 'u32');
    const whole = engine.tensorFrom('logits', [N * V], logits);
    promptLogprobs(engine, { ...t, logits: whole, V, rows: N, rowOffset: 0, K: 0, topIds: untouched });
    expect(Array.from(await engine.read(untouched))).toEqual([7]);
    expect(Array.from(await engine.read(t.ranks))).toEqual(ref.map((r) => r.rank));
    for (const x of [...Object.values(t), untouched, whole]) engine.destroyTensor(x);
    delete engine.knobs.kernelVariants['prompt-logprobs'];
  });
});
