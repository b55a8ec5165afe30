import { describe, it, expect } from 'vitest';
import { generationRecords } from '../../ppo/loggers/generation-records.ts';

describe('generation records (verl _dump_generations)', () => {
  const sample = (score: number, extra: Record<string, unknown> | null) => ({
    input: 'q',
    output: 'a',
    gts: undefined,
    score,
    rewardExtraInfo: extra,
  });

  it('keeps an extra field only when every sample has it, as verl keeps a column as long as the batch', () => {
    expect(generationRecords(3, [sample(1, { acc: 1, pred: 'x' }), sample(0, { acc: 0 })])).toEqual([
      { input: 'q', output: 'a', gts: null, score: 1, step: 3, acc: 1 },
      { input: 'q', output: 'a', gts: null, score: 0, step: 3, acc: 0 },
    ]);
    expect(generationRecords(1, [sample(1, null), sample(0, { acc: 0 })])).toEqual([
      { input: 'q', output: 'a', gts: null, score: 1, step: 1 },
      { input: 'q', output: 'a', gts: null, score: 0, step: 1 },
    ]);
  });

  it('puts given columns first and lets a field named score replace the score, keeping its place', () => {
    const [record] = generationRecords(0, [sample(0.5, { score: 0.7, acc: true })], { reward: [0.5] });
    expect(record).toEqual({ input: 'q', output: 'a', gts: null, score: 0.7, step: 0, reward: 0.5, acc: true });
    expect(Object.keys(record)).toEqual(['input', 'output', 'gts', 'score', 'step', 'reward', 'acc']);
  });
});
