// The RLHF pipeline's data on the arithmetic task (ppo/tasks/arithmetic-preferences.ts): every chosen answer is one
// the task's exact-match rule accepts and every rejected one is one it refuses; the rejected kinds come in their
// stated shares; the SFT demonstrations are the built-in warm start's (same annotator habit, same draws).
import { describe, it, expect } from 'vitest';
import { Rng } from '../../engine/rng.ts';
import type { RlExample } from '../../ppo/data/dataset.ts';
import { computeScore } from '../../ppo/rewards/arithmetic.ts';
import { arithmeticDataset, arithmeticTokenizer } from '../../ppo/tasks/arithmetic.ts';
import { BUILTIN_TASKS } from '../../ppo/tasks/builtin-tasks.ts';
import {
  arithmeticQa,
  preferencePairs,
  rejectedAnswer,
  sloppyDemonstrations,
} from '../../ppo/tasks/arithmetic-preferences.ts';

const problems = arithmeticQa(arithmeticDataset({ digits: 2, trainSize: 2000, valSize: 0, seed: 4 }).train);

describe('arithmetic preference pairs', () => {
  it('chosen is the bare correct sum, rejected an answer exact match refuses, with the same prompt', () => {
    const pairs = preferencePairs(problems, 1);
    expect(pairs).toHaveLength(problems.length);
    pairs.forEach((pair, i) => {
      expect(pair.prompt).toEqual([{ role: 'user', content: problems[i].question }]);
      expect(pair.chosen).toEqual([{ role: 'assistant', content: problems[i].answer }]);
      expect(computeScore(pair.chosen[0].content, problems[i].answer)).toBe(1);
      expect(pair.rejected[0].role).toBe('assistant');
      expect(computeScore(pair.rejected[0].content, problems[i].answer)).toBe(0);
      // Every answer is spelled in the task's vocabulary (no unknown token).
      expect(arithmeticTokenizer.decode(arithmeticTokenizer.encode(pair.rejected[0].content))).toBe(
        pair.rejected[0].content,
      );
    });
  });

  it('half the rejected answers are the trailing space, a quarter each a wrong sum and extra text', () => {
    const pairs = preferencePairs(problems, 2);
    const share = (test: (rejected: string, sum: string) => boolean) =>
      pairs.filter((p) => test(p.rejected[0].content, p.chosen[0].content)).length / pairs.length;
    expect(share((r, s) => r === `${s} `)).toBeCloseTo(0.5, 1);
    expect(
      share(
        (r, s) => /^[0-9]+$/.test(r) && Math.abs(Number(r) - Number(s)) >= 1 && Math.abs(Number(r) - Number(s)) <= 3,
      ),
    ).toBeCloseTo(0.25, 1);
    expect(share((r, s) => r.endsWith(`=${s}`) && r.includes('+'))).toBeCloseTo(0.25, 1);
    expect(preferencePairs(problems, 2)).toEqual(pairs);
    expect(preferencePairs(problems, 3)).not.toEqual(pairs);
  });

  it('a wrong sum is never negative', () => {
    const rng = new Rng(7);
    for (let i = 0; i < 200; i++) expect(Number(rejectedAnswer('off by some', '0+0=', '0', rng))).toBeGreaterThan(0);
  });

  it("the SFT demonstrations are the built-in warm start's SFT stage", async () => {
    const { train } = BUILTIN_TASKS.arithmetic.records(1, 16);
    // The arithmetic warm start reads only each example's ground truth and prompt ids.
    const examples = train.map((r) => ({
      promptIds: [],
      groundTruth: (r.row.reward_model as { ground_truth: string }).ground_truth,
    }));
    const [, sftStage] = await BUILTIN_TASKS.arithmetic.warmStart(examples as unknown as RlExample[], 9, null, 0);
    const demonstrations = sloppyDemonstrations(arithmeticQa(train), 9);
    expect(sftStage.examples.map((e) => arithmeticTokenizer.decode(e.response))).toEqual(
      demonstrations.map((d) => `${d.answer}</s>`),
    );
    expect(demonstrations.filter((d) => d.answer.endsWith(' ')).length / demonstrations.length).toBeCloseTo(0.7, 1);
  });
});
