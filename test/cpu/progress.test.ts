import { describe, it, expect } from 'vitest';
import { formatStepLine, formatValidationLine, validationProgress } from '../../ppo/jobs/progress.ts';

const base = {
  'training/global_step': 5,
  'critic/score/mean': 0.25,
  'actor/ppo_kl': 0.00123,
  'actor/entropy': 0.5,
  'actor/pg_clipfrac': 0.01,
  'response_length/mean': 3.6,
  'perf/throughput': 700,
  'perf/mfu': 0.15,
  'timing_s/gen': 0.21,
  'timing_s/reward': 0.01,
  'timing_s/adv': 0.3,
  'timing_s/update_actor': 0.9,
  'timing_s/step': 1.5,
};

describe('step line', () => {
  it(
    'shows progress, ETA from the steps this process ran, the watched numbers and every phase but the whole ' + 'step',
    () => {
      const line = formatStepLine(base, 10, 3, 4);
      expect(line).toMatch(
        /^\[##########\.{10}\] step 5\/10 eta 10s {2}reward 0\.250 {2}ppo_kl 0\.0012 {2}entropy 0\.500 {2}clipfrac 0\.010 {2}len 3\.6 {2}tok\/s 700 {2}mfu 0\.150 {2}/,
      );
      expect(line).toMatch(/\(gen 0\.2s, reward 0\.0s, adv 0\.3s, update_actor 0\.9s\)$/);
      expect(line).not.toContain('acc');
      expect(line).not.toContain('step 1.5s');
    },
  );

  it(
    'shows accuracy when the reward is a pass/fail check, and the KL, value loss and searches when the run has ' +
      'them',
    () => {
      const line = formatStepLine(
        {
          ...base,
          'critic/score/accuracy': 0.25,
          'actor/reward_kl_penalty': 0.0042,
          'critic/vf_loss': 0.0812,
          'env/number_of_valid_search': 0.75,
        },
        10,
        0,
        5,
      );
      expect(line).toContain('reward 0.250  acc 25.0%  kl 0.0042  ppo_kl 0.0012');
      expect(line).toContain('vf_loss 0.0812');
      expect(line).toContain('searches 0.75');
    },
  );
});

describe('validation progress line', () => {
  it('shows sequences done of the total, an ETA from them and the generated tokens per second', () => {
    expect(formatValidationLine({ done: 330, total: 1319, tokens: 41_000 }, 100)).toBe(
      '[#####...............] validation 330/1319 sequences eta 5m00s  410 generated tok/s  (1m40s so far)',
    );
    expect(formatValidationLine({ done: 0, total: 8, tokens: 12 }, 4)).toContain(
      'validation 0/8 sequences eta ?  3 generated tok/s',
    );
  });

  it('writes at most one line per interval, the first after one interval', () => {
    let clock = 0;
    const lines: string[] = [];
    const report = validationProgress(
      (line) => lines.push(line),
      10,
      () => clock,
    );
    for (const [t, done] of [
      [2, 1],
      [9.9, 2],
      [10, 3],
      [15, 4],
      [19.9, 5],
      [21, 6],
      [40, 7],
    ]) {
      clock = t * 1000;
      report({ done, total: 8, tokens: 10 * done });
    }
    expect(lines.map((l) => l.match(/validation (\d)\/8/)![1])).toEqual(['3', '6', '7']);
  });
});
