import { describe, it, expect } from 'vitest';
import { computeScore, toRewardScore } from '../../ppo/rewards/index.ts';
import * as mathDapo from '../../ppo/rewards/math-dapo.ts';
import { filterMetricValues } from '../../ppo/algorithm/dynamic-sampling.ts';
import { validationMetrics } from '../../ppo/metrics/validation-metrics.ts';
import { generationRecords } from '../../ppo/loggers/generation-records.ts';

type Kwargs = { strict_box_verify?: boolean; pause_tokens_index?: number[] };

// Recorded by running verl b178a3cd's verl/utils/reward_score/math_dapo.py (the mirror's file, unchanged) under
// Python 3.11: compute_score(solution_str, ground_truth, **kwargs) on each input. They cover each normalisation and
// the places where Python and JavaScript differ (code-point slices, `.` and \r, \s and strip(), isdigit, (?i)).
const CASES: [string, string, Kwargs, mathDapo.MathDapoResult][] = [
  // last "Answer:" line, exact
  ['Let me add.\nAnswer: 42', '42', {}, { score: 1.0, acc: true, pred: '42' }],
  // case-insensitive, spaces around the colon
  ['so the final ANSWER : 9', '9', {}, { score: 1.0, acc: true, pred: '9' }],
  // the last of several matches wins
  ['Answer: 3\nwait, no.\nanswer: 4', '4', {}, { score: 1.0, acc: true, pred: '4' }],
  // an earlier answer does not count
  ['Answer: 3\nwait, no.\nanswer: 4', '3', {}, { score: -1.0, acc: false, pred: '4' }],
  // no "Answer:" → [INVALID]
  ['I think it is \\boxed{5}', '5', {}, { score: -1.0, acc: false, pred: '[INVALID]' }],
  // \s* after the colon crosses newlines
  ['Answer:\n\n  17', '17', {}, { score: 1.0, acc: true, pred: '17' }],
  // units removed (inches)
  ['Answer: 10 inches', '10', {}, { score: 1.0, acc: true, pred: '10' }],
  // \text{ cm} and \text{m}
  ['Answer: 5 \\text{ cm} + 2\\text{m}', '5+2', {}, { score: 1.0, acc: true, pred: '5+2' }],
  // \boxed{} unwrapped (greedy)
  ['Answer: \\boxed{\\frac{1}{2}}', '\\frac{1}{2}', {}, { score: 1.0, acc: true, pred: '\\frac{1}{2}' }],
  // \frac shorthand
  ['Answer: \\frac12', '\\frac{1}{2}', {}, { score: 1.0, acc: true, pred: '\\frac{1}{2}' }],
  // \frac1{2} is rewritten as verl does
  ['Answer: \\frac1{2}', '\\frac{1}{2}', {}, { score: -1.0, acc: false, pred: '\\frac{1}{{}2}' }],
  // \sqrt shorthand
  ['Answer: 2\\sqrt3', '2\\sqrt{3}', {}, { score: 1.0, acc: true, pred: '2\\sqrt{3}' }],
  // \dfrac is not normalised
  ['Answer: \\dfrac{1}{2}', '\\frac{1}{2}', {}, { score: -1.0, acc: false, pred: '\\dfrac{1}{2}' }],
  // $…$ keeps the first math span of the line
  ['Answer: the value is $12$ dollars.', '12', {}, { score: 1.0, acc: true, pred: '12' }],
  // `=` splits, the last side kept
  ['Answer: $x = y = \\frac{3}{4}$.', '\\frac{3}{4}', {}, { score: -1.0, acc: false, pred: '\\frac{3}{4}.' }],
  // thousands commas dropped from a number
  ['Answer: 1,000,000', '1000000', {}, { score: 1.0, acc: true, pred: '1000000' }],
  // commas kept in a tuple
  ['Answer: (1, 2)', '(1,2)', {}, { score: 1.0, acc: true, pred: '(1,2)' }],
  // \text{and} becomes a comma, then a number
  ['Answer: 1 \\text{and} 2', '12', {}, { score: 1.0, acc: true, pred: '12' }],
  // \$, ^\circ, \overline and \textbf
  ['Answer: \\$\\textbf{0.\\overline{3}}^\\circ', '0.3', {}, { score: 1.0, acc: true, pred: '0.3' }],
  // "a " removed
  ['Answer: a 5', '5', {}, { score: 1.0, acc: true, pred: '5' }],
  // ground truth normalised too
  ['Answer: 90', '90^\\circ', {}, { score: 1.0, acc: true, pred: '90' }],
  // answer kept within the last 300 characters
  [`${'x'.repeat(400)}\nAnswer: 7`, '7', {}, { score: 1.0, acc: true, pred: '7' }],
  // answer before the last 300 characters → [INVALID]
  [`Answer: 7\n${'x'.repeat(300)}`, '7', {}, { score: -1.0, acc: false, pred: '[INVALID]' }],
  // the 300-character cut falls inside the answer line
  [`Answer: 123456${'y'.repeat(295)}`, '123456', {}, { score: -1.0, acc: false, pred: '[INVALID]' }],
  // 300 code points, not UTF-16 units
  [`Answer: 7\n${'😀'.repeat(290)}`, '7', {}, { score: 1.0, acc: true, pred: '7' }],
  // ſ matches s case-insensitively, a no-break space is \s
  ['ANſWER:\u00a08', '8', {}, { score: 1.0, acc: true, pred: '8' }],
  // U+001C is whitespace to Python
  ['Answer:\u001c8\u001c', '8', {}, { score: 1.0, acc: true, pred: '8' }],
  // U+FEFF is not stripped
  ['Answer: 8\ufeff', '8', {}, { score: -1.0, acc: false, pred: '8\ufeff' }],
  // Unicode digits: commas dropped (isdigit)
  ['Answer: ²,³', '²³', {}, { score: 1.0, acc: true, pred: '²³' }],
  // \r is matched by `.`
  ['Answer: $1$\r$2$', '1', {}, { score: 1.0, acc: true, pred: '1' }],
  // strict_box_verify: last box of the last 100 characters, compared as is
  ['so \\boxed{12}', '12', { strict_box_verify: true }, { score: 1.0, acc: true, pred: '12' }],
  // strict_box_verify: no normalisation
  ['Answer: 12, so \\boxed{ 12}', '12', { strict_box_verify: true }, { score: -1.0, acc: false, pred: ' 12' }],
  // strict_box_verify: "\boxed 5" is not a box → pred null
  ['so \\boxed 5', '5', { strict_box_verify: true }, { score: -1.0, acc: false, pred: null }],
  // strict_box_verify: box before the last 100 characters
  [`\\boxed{12}${'z'.repeat(100)}`, '12', { strict_box_verify: true }, { score: -1.0, acc: false, pred: null }],
  // pause_tokens_index: from the last pause − 100
  [
    `\\boxed{12}${'z'.repeat(100)}`,
    '12',
    { strict_box_verify: true, pause_tokens_index: [1, 2, 3, 100] },
    { score: 1.0, acc: true, pred: '12' },
  ],
  // pause_tokens_index: a negative start counts from the end
  [
    `\\boxed{12}${'z'.repeat(100)}`,
    '12',
    { strict_box_verify: true, pause_tokens_index: [0, 0, 0, 5] },
    { score: -1.0, acc: false, pred: null },
  ],
];

describe('math_dapo (verl.utils.reward_score.math_dapo)', () => {
  // boxedFallback false: b178a3cd's verify (verl 1dda039b's fallback to the last \boxed{} is checked against verl's
  // recording in test/webgpu/ppo-verl-cases.test.ts, fixture sample-verl_1dda039b.json).
  it.each(CASES)('%j vs %j %j', (solution, truth, kwargs, expected) => {
    expect(
      mathDapo.computeScore(solution, truth, kwargs.strict_box_verify, kwargs.pause_tokens_index ?? null, false),
    ).toEqual(expected);
  });

  it('falls back to the last \\boxed{} when there is no "Answer:" line (verl 1dda039b)', () => {
    expect(mathDapo.computeScore('I think it is \\boxed{5}', '5')).toEqual({ score: 1, acc: true, pred: '5' });
    expect(mathDapo.computeScore('I think it is \\boxed{ 5 }', '5')).toEqual({ score: -1, acc: false, pred: ' 5 ' });
    expect(mathDapo.computeScore('no answer at all', '5').pred).toBe('[INVALID]');
  });

  it('refuses a pause_tokens_index that does not hold 4 indices, as verl asserts', () => {
    expect(() => mathDapo.computeScore('\\boxed{1}', '1', true, [1, 2])).toThrow(
      'math_dapo: pause_tokens_index must hold 4 indices, got [1,2]',
    );
  });
});

describe('math_dapo through default_compute_score', () => {
  // verl: data_source in ["math_dapo", "math", "math_dapo_reasoning"] or data_source.startswith("aime").
  it.each(['math_dapo', 'math', 'math_dapo_reasoning', 'aime24', 'aime_2025'])(
    '%s is scored by math_dapo',
    (source) => {
      for (const [solution, truth, kwargs, expected] of CASES) {
        // b178a3cd's recordings hold wherever 1dda039b's \boxed{} fallback does not fire.
        if (!kwargs.strict_box_verify && expected.pred !== '[INVALID]')
          expect(computeScore(source, solution, truth)).toEqual(expected);
      }
    },
  );

  it('needs a string ground truth', () => {
    expect(() => computeScore('aime24', 'Answer: 5', 5)).toThrow(
      'reward for data_source "aime24": reward_model.ground_truth must be a string, got 5',
    );
  });

  it('names the aime prefix among the known sources', () => {
    expect(() => computeScore('dapo', 'x', '1')).toThrow(
      /known: .*math_dapo, math, math_dapo_reasoning, .*any name starting with aime, and any name ending in _subem/,
    );
  });

  // What the trainer does with a response's reward: toRewardScore keeps the dict as reward_extra_info, which the
  // dynamic-sampling filter, the validation metrics and the generation dumps read.
  const responses = [
    ['Answer: 7', '7'],
    ['Answer: 8', '7'],
    ['Answer: 7', '7'],
    ['no answer', '7'],
  ].map(([solution, truth]) => toRewardScore(computeScore('aime24', solution, truth), 'reward (data_source aime24)'));

  it('reaches reward_extra_info: score, acc and pred', () => {
    expect(responses.map((r) => r.score)).toEqual([1, -1, 1, -1]);
    expect(responses.map((r) => r.rewardExtraInfo)).toEqual([
      { score: 1, acc: true, pred: '7' },
      { score: -1, acc: false, pred: '8' },
      { score: 1, acc: true, pred: '7' },
      { score: -1, acc: false, pred: '[INVALID]' },
    ]);
  });

  it('algorithm.filter_groups.metric=acc reads its acc field', () => {
    expect(
      filterMetricValues(
        'acc',
        responses.map((r) => r.score),
        responses.map((r) => r.rewardExtraInfo),
      ),
    ).toEqual([1, 0, 1, 0]);
  });

  it('validation reports acc as the core variable and maj@n over pred; rollout dumps carry acc and pred', () => {
    const metrics = validationMetrics(
      responses.map((r, i) => ({
        dataSource: 'aime24',
        prompt: Math.floor(i / 2),
        reward: r.score,
        rewardExtraInfo: r.rewardExtraInfo,
      })),
    );
    expect(metrics['val-core/aime24/acc/mean@2']).toBe(0.5);
    expect(metrics['val-aux/aime24/reward/mean@2']).toBe(0);
    expect(Object.keys(metrics)).toContain('val-core/aime24/acc/maj@2/mean');
    expect(Object.keys(metrics).some((key) => key.includes('/pred/'))).toBe(false);
    const records = generationRecords(
      3,
      responses.map((r) => ({ input: 'q', output: 'a', gts: '7', score: r.score, rewardExtraInfo: r.rewardExtraInfo })),
    );
    expect(records[1]).toEqual({ input: 'q', output: 'a', gts: '7', score: -1, step: 3, acc: false, pred: '8' });
  });
});
