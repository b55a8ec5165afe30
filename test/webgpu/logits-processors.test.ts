// kernels/decode/logits-processors against its float64 reference: presence and frequency penalties over each row's
// generated tokens (repeats counted once per distinct token, by count), the repetition penalty over its prompt and
// generated tokens (a token in both, or repeated, penalised once; above and below 1; with presence on top),
// logit_bias, EOS masked before min_tokens (not after), min_p at the row's temperature (off when greedy), rows the
// host finished left alone, and an ignore_eos row the sampler finished on an EOS reopened (vLLM's ignore_eos: no
// logit masked, generation goes on).
import { describe, it, expect } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { ROW_SAMPLING_WORDS, packRowSampling } from '../../kernels/decode/sample.ts';
import {
  NEUTRAL_PROCESSING,
  ROW_PROCESSING_WORDS,
  logitsProcessorsVariants,
  packRowProcessing,
  processLogits,
  type RowProcessing,
} from '../../kernels/decode/logits-processors.ts';
import { processLogitsRef } from '../../kernels/decode/logits-processors.ref.ts';
import { randomArray } from '../support/arrays.ts';

describe.each(logitsProcessorsVariants.map((v) => [v.name]))('logits-processors (%s)', (variant) => {
  it('matches the reference: penalties, repetition, logit_bias, ignore_eos, min_tokens, min_p; finished untouched', async () => {
    const engine = await gpuEngine();
    engine.knobs.kernelVariants['logits-processors'] = variant;
    const V = 70;
    const outStride = 6;
    const eosIds = [2, 9];
    const rows: {
      p: RowProcessing;
      generated: number[];
      temperature: number;
      /** 1: the sampler drew an EOS; 2: the host ended the row. */
      finished?: 1 | 2;
      prompt?: number[];
    }[] = [
      {
        p: { ...NEUTRAL_PROCESSING, presencePenalty: 0.5, frequencyPenalty: 0.25 },
        generated: [4, 7, 4, 4, 11],
        temperature: 1,
      },
      {
        p: {
          ...NEUTRAL_PROCESSING,
          logitBias: new Map([
            [3, 5],
            [60, -100],
          ]),
          ignoreEos: true,
        },
        generated: [1],
        temperature: 0.7,
        finished: 1,
      },
      { p: { ...NEUTRAL_PROCESSING, minTokens: 3, minP: 0.1 }, generated: [5, 6], temperature: 0.8 },
      { p: { ...NEUTRAL_PROCESSING, minTokens: 2, minP: 0.1 }, generated: [5, 6], temperature: 0 },
      {
        p: { ...NEUTRAL_PROCESSING, presencePenalty: 9, ignoreEos: true },
        generated: [1, 2],
        temperature: 1,
        finished: 2,
      },
      {
        p: { ...NEUTRAL_PROCESSING, repetitionPenalty: 1.3, presencePenalty: 0.5 },
        prompt: [12, 13, 12, 40, 4],
        generated: [4, 13, 50, 50],
        temperature: 1,
      },
      { p: { ...NEUTRAL_PROCESSING, repetitionPenalty: 0.8 }, prompt: [20, 21, 22, 23], generated: [], temperature: 1 },
    ];
    const B = rows.length;
    const logits = randomArray(B * V, 3, 3);
    const outRows = [3, 0, 4, 1, 2, 6, 5];
    const promptStride = 8;
    const prompts = new Array<number>(B * promptStride).fill(0);
    rows.forEach((r, b) => r.prompt?.forEach((t, j) => (prompts[b * promptStride + j] = t)));
    const tokens = new Array<number>(B * outStride).fill(0);
    rows.forEach((r, b) => r.generated.forEach((t, j) => (tokens[outRows[b] * outStride + j] = t)));
    const t = {
      logits: engine.tensorFrom('logits', [B * V], logits),
      rowProcessing: engine.tensorFrom(
        'rowProcessing',
        [B * ROW_PROCESSING_WORDS],
        rows.flatMap((r) => packRowProcessing(r.p, r.prompt?.length ?? 0)),
        'u32',
      ),
      rowSampling: engine.tensorFrom(
        'rowSampling',
        [B * ROW_SAMPLING_WORDS],
        rows.flatMap((r, b) =>
          packRowSampling({ temperature: r.temperature, topK: -1, topP: 1, seed: 0, stream: b, outRow: outRows[b] }),
        ),
        'u32',
      ),
      tokens: engine.tensorFrom('tokens', [B * outStride], tokens, 'u32'),
      prompts: engine.tensorFrom('prompts', [B * promptStride], prompts, 'u32'),
      steps: engine.tensorFrom(
        'steps',
        [B],
        rows.map((r) => r.generated.length),
        'u32',
      ),
      finished: engine.tensorFrom(
        'finished',
        [B],
        rows.map((r) => r.finished ?? 0),
        'u32',
      ),
      eosIds: engine.tensorFrom('eosIds', [2], eosIds, 'u32'),
    };
    processLogits(engine, { ...t, V, rows: B, numEos: 2, outStride, promptStride });
    const got = await engine.read(t.logits);
    rows.forEach((r, b) => {
      const row = logits.subarray(b * V, (b + 1) * V);
      const want =
        r.finished === 2 ? Array.from(row) : processLogitsRef(row, r.p, r.generated, eosIds, r.temperature, r.prompt);
      want.forEach((w, v) => {
        const x = got[b * V + v];
        if (w === -Infinity) expect(x, `row ${b} token ${v} masked`).toBeLessThan(-1e38);
        else expect(Math.abs(x - w), `row ${b} token ${v}`).toBeLessThan(1e-5);
      });
    });
    // The cases do something: EOS masked in row 2 but not 3 (min_tokens reached) nor 1 (ignore_eos masks nothing),
    // min_p masks in row 2 only; row 1 reopened, row 4 (the host's) not.
    expect(got[V + 2]).toBe(logits[V + 2]);
    expect(Array.from(await engine.read(t.finished))).toEqual([0, 0, 0, 0, 2, 0, 0]);
    expect(got[2 * V + 9]).toBeLessThan(-1e38);
    expect(got[3 * V + 9]).toBeGreaterThan(-1e38);
    expect(Array.from(got.subarray(2 * V, 3 * V)).filter((x) => x < -1e38).length).toBeGreaterThan(2);
    expect(Array.from(got.subarray(3 * V, 4 * V)).filter((x) => x < -1e38).length).toBe(0);
    // Repetition: positive logits shrink and negative ones grow in magnitude above 1 (the reverse below 1), on the
    // prompt's tokens too; a token neither in the prompt nor generated is untouched.
    const changed = (b: number, v: number) => got[b * V + v] !== logits[b * V + v];
    for (const v of [12, 13, 40, 4, 50]) expect(changed(5, v), `row 5 token ${v}`).toBe(true);
    expect(changed(5, 14)).toBe(false);
    for (const v of [20, 21, 22, 23])
      expect(Math.abs(got[6 * V + v]) < Math.abs(logits[6 * V + v])).toBe(logits[6 * V + v] < 0);
    for (const x of Object.values(t)) engine.destroyTensor(x);
    delete engine.knobs.kernelVariants['logits-processors'];
  });
});
