import { describe, it, expect } from 'vitest';
import { validationMetrics, type ValidationResponse } from '../../ppo/metrics/validation-metrics.ts';

/** n responses to each of the prompts, rewards and reward_extra_info from `make(prompt, sample)`. */
function responses(
  dataSource: string,
  prompts: number,
  n: number,
  make: (prompt: number, sample: number) => Pick<ValidationResponse, 'reward' | 'rewardExtraInfo'>,
): ValidationResponse[] {
  return Array.from({ length: prompts * n }, (_, i) => ({
    dataSource,
    prompt: Math.floor(i / n),
    ...make(Math.floor(i / n), i % n),
  }));
}

describe('validation metrics (verl process_validation_metrics names)', () => {
  it('one plain-number response per prompt: only val-core mean@1 of the reward, per data source', () => {
    const metrics = validationMetrics([
      ...responses('gsm8k', 3, 1, (p) => ({ reward: p === 0 ? 1 : 0, rewardExtraInfo: null })),
      ...responses('math', 2, 1, () => ({ reward: 0.5, rewardExtraInfo: null })),
    ]);
    expect(metrics).toEqual({ 'val-core/gsm8k/reward/mean@1': 1 / 3, 'val-core/math/reward/mean@1': 0.5 });
  });

  it(
    'a dict reward: each numeric entry is a variable (score, acc as 0/1), acc becomes the core one, strings are ' +
      'left out',
    () => {
      const metrics = validationMetrics(
        responses('gsm8k', 4, 1, (p) => ({
          reward: p === 0 ? 0.9 : -0.1,
          rewardExtraInfo: { score: p === 0 ? 1 : 0, acc: p === 0, pred: `${p}` },
        })),
      );
      expect(Object.keys(metrics).sort()).toEqual([
        'val-aux/gsm8k/reward/mean@1',
        'val-aux/gsm8k/score/mean@1',
        'val-core/gsm8k/acc/mean@1',
      ]);
      expect(metrics['val-core/gsm8k/acc/mean@1']).toBe(0.25);
      expect(metrics['val-aux/gsm8k/score/mean@1']).toBe(0.25);
      expect(metrics['val-aux/gsm8k/reward/mean@1']).toBeCloseTo(0.15, 12);
    },
  );

  it(
    'n = 4 responses per prompt: std@4, best/worst of 2 and 4 (bootstrap mean and std), maj with a pred; core: ' +
      'mean, best and maj at @4',
    () => {
      // Prompt 0 answers "7" three times (right, score 1) and "3" once; prompt 1 is always wrong with "5".
      const metrics = validationMetrics(
        responses('gsm8k', 2, 4, (p, s) => {
          const right = p === 0 && s !== 2;
          return {
            reward: right ? 1 : 0,
            rewardExtraInfo: { score: right ? 1 : 0, pred: p === 0 ? (right ? '7' : '3') : '5' },
          };
        }),
      );
      const forVariable = (v: string) =>
        [
          'mean@4',
          'std@4',
          ...[2, 4].flatMap((k) => [
            `best@${k}/mean`,
            `best@${k}/std`,
            `worst@${k}/mean`,
            `worst@${k}/std`,
            `maj@${k}/mean`,
            `maj@${k}/std`,
          ]),
        ].map((m) => `${v}/${m}`);
      // verl's test is a prefix (mean, maj, best) and `@4` in the name, so the stds of best@4 and maj@4 are core too.
      const core = new Set([
        'reward/mean@4',
        'reward/best@4/mean',
        'reward/best@4/std',
        'reward/maj@4/mean',
        'reward/maj@4/std',
      ]);
      const expected = [...forVariable('reward'), ...forVariable('score')].map(
        (m) => `${core.has(m) ? 'val-core' : 'val-aux'}/gsm8k/${m}`,
      );
      expect(Object.keys(metrics).sort()).toEqual(expected.sort());
      expect(metrics['val-core/gsm8k/reward/mean@4']).toBe(0.375);
      // Population std per prompt (√(3/16) and 0), averaged over the prompts.
      expect(metrics['val-aux/gsm8k/reward/std@4']).toBeCloseTo(Math.sqrt(3 / 16) / 2, 12);
      // Prompt 0's best of 4 draws misses only if all four draw the wrong one (1/256); prompt 1 never scores.
      expect(metrics['val-core/gsm8k/reward/best@4/mean']).toBeCloseTo((1 - 1 / 256) / 2, 2);
      expect(metrics['val-aux/gsm8k/reward/worst@2/mean']).toBeCloseTo(9 / 16 / 2, 1);
      // The majority of 4 draws of prompt 0 is "7" unless "3" is drawn at least as often first: mostly right.
      expect(metrics['val-core/gsm8k/reward/maj@4/mean']).toBeGreaterThan(0.4);
      expect(metrics['val-core/gsm8k/reward/maj@4/mean']).toBeLessThan(0.5);
      expect(metrics['val-aux/gsm8k/score/best@2/std']).toBeGreaterThan(0);
    },
  );
});
