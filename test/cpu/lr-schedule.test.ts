import { describe, it, expect } from 'vitest';
import { loadConfig } from '../../ppo/config.ts';
import { learningRate, learningRateFactor, warmupSteps } from '../../ppo/algorithm/lr-schedule.ts';

const optim = (...overrides: string[]) =>
  loadConfig({ overrides: overrides.map((o) => `actor_rollout_ref.actor.optim.${o}`) }).actor_rollout_ref.actor.optim;
const factors = (o: ReturnType<typeof optim>, total: number, steps: number) =>
  Array.from({ length: steps }, (_, s) => learningRateFactor(o, s, total));

// Expected values from verl's torch_functional schedules (LambdaLR lambdas) evaluated at these steps.
describe('learning-rate schedule', () => {
  it('defaults to a constant lr', () => {
    expect(factors(optim(), 10, 3)).toEqual([1, 1, 1]);
    expect(learningRate(optim('lr=2e-6'), 0, 10)).toBe(2e-6);
  });

  it('constant with linear warmup from 0', () => {
    expect(factors(optim('lr_warmup_steps=3'), 10, 5)).toEqual([0, 1 / 3, 2 / 3, 1, 1]);
  });

  it('warmup from a ratio of the total steps when lr_warmup_steps is negative', () => {
    expect(warmupSteps(optim('lr_warmup_steps_ratio=0.15'), 20)).toBe(3);
    expect(warmupSteps(optim('lr_warmup_steps_ratio=0.15', 'lr_warmup_steps=1'), 20)).toBe(1);
  });

  it('cosine with warmup from min_lr_ratio and a floor at it', () => {
    const expected = [
      0.1, 0.55, 1.0, 0.9657457896300791, 0.8681980515339465, 0.7222075445642905, 0.55, 0.37779245543570966,
      0.23180194846605368, 0.13425421036992102, 0.10000000000000003,
    ];
    const got = factors(optim('warmup_style=cosine', 'lr_warmup_steps=2', 'min_lr_ratio=0.1'), 10, 11);
    got.forEach((g, i) => expect(g).toBeCloseTo(expected[i], 14));
  });

  it('cosine num_cycles=1 returns to the peak', () => {
    const expected = [
      1.0, 0.8535533905932737, 0.5, 0.14644660940672627, 0.0, 0.14644660940672616, 0.5, 0.8535533905932737, 1.0,
    ];
    const got = factors(optim('warmup_style=cosine', 'num_cycles=1'), 8, 9);
    got.forEach((g, i) => expect(g).toBeCloseTo(expected[i], 14));
  });
});
