import { describe, it, expect, vi } from 'vitest';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { computeScore, toRewardScore, RULE_DATA_SOURCES } from '../../ppo/rewards/index.ts';
import * as gsm8k from '../../ppo/rewards/gsm8k.ts';
import * as math from '../../ppo/rewards/math.ts';
import * as qaEm from '../../ppo/rewards/qa-em.ts';
import { loadCustomRewardFunction } from '../../ppo/rewards/custom-reward-node.ts';
import { describeWithFixtures, readFixtureJson } from '../support/fixtures.ts';
import { makeTempDirSync } from '../support/temp-dir.ts';

const CUSTOM_REWARD = fileURLToPath(new URL('../support/data/custom-reward.ts', import.meta.url));
const CUSTOM_REWARD_NODE = new URL('../../ppo/rewards/custom-reward-node.ts', import.meta.url).href;
const NODE_LOADER = new URL('../../tools/node-loader.js', import.meta.url).href;

interface VerlCase {
  function: string;
  kwargs: { method: gsm8k.Gsm8kMethod; format_score: number; score: number };
  inputs: { solution_str: string[]; ground_truth: string[] };
  outputs: { score: number[] };
}

// Expected scores recorded by running verl's reward_score.math and search_r1_like_qa_em logic (transcribed to
// Python, upstream semantics) on these inputs; they cover the normalisations and the exception fall-backs.
const MATH_CASES: [string, string, number][] = [
  ['The answer is \\boxed{\\frac12}.', '\\frac{1}{2}', 1],
  ['so \\boxed{0.5}', '\\frac{1}{2}', 1],
  ['so \\boxed{1/2}', '\\dfrac{1}{2}', 1],
  ['\\boxed{3/04}', '\\frac{3}{04}', 0],
  ['first \\boxed{2} then \\boxed{3}', '3', 1],
  ['first \\boxed{2} then \\boxed{3}', '2', 0],
  ['\\boxed{\\left( 3, 4 \\right)}', '(3,4)', 1],
  ['\\boxed{x = 5}', '5', 1],
  ['\\boxed{10\\text{ inches}}', '10', 1],
  ['\\boxed{90^\\circ}', '90', 1],
  ['\\boxed{\\sqrt2}', '\\sqrt{2}', 1],
  ['\\boxed{\\$5}', '5', 1],
  ['\\boxed{50\\%}', '50', 1],
  ['\\boxed{.5}', '0.5', 1],
  ['\\boxed{\\frac{a}{b}}', '\\frac{a}{b}', 1],
  ['$\\boxed 7$ done', '7', 1],
  ['\\fbox{7}', '7', 0],
  ['no box, 7', '7', 0],
  ['\\boxed{7', '7', 0],
  ['\\boxed{\\frac}', '\\frac', 1],
  ['\\boxed{\\frac}', 'x', 0],
  ['\\boxed{\\sqrt}', '\\sqrt', 1],
  ['\\boxed{1\\text{ a}\\text{ b}}', '1\\text{ a}\\text{ b}', 1],
  ['\\boxed{\\{1,2\\}}', '\\{1,2\\}', 1],
  ['\\boxed{-0/1}', '\\frac{-0}{1}', 0],
  ['\\boxed{\\tfrac{3}{4}}', '3/4', 1],
  ['\\boxed{ab = 5}', '5', 0],
  ['\\boxed{abc = 5}', '5', 0],
  ['\\boxed{1 \\! 000}', '1000', 1],
];
// Recorded by running verl b178a3cd's math_reward.py (the mirror's file) under Python 3.11: its strip_string removes
// \\% (two backslashes) as well as \%, which three or four backslashes before % still leave after halving \\.
const MATH_PERCENT_CASES: [string, string, number][] = [
  ['\\boxed{50\\\\\\%}', '50', 1.0],
  ['\\boxed{5\\\\\\\\%}', '5', 1.0],
];
const QA_CASES: [string, string | string[], number][] = [
  ['<answer>The Eiffel Tower</answer>', ['eiffel tower'], 1.0],
  ['<answer> Paris. </answer>', ['paris'], 1.0],
  ['<answer>An apple</answer>', ['apple'], 1.0],
  ['<answer>Anne</answer>', ['nne'], 0.0],
  ['<answer>London</answer>', ['Paris', 'london'], 1.0],
  ['<answer>London</answer>', 'London', 1.0],
  ['<answer>Rome</answer>', ['Paris'], 0.0],
  ['no tags', ['Paris'], 0],
  ['<answer>x</answer><answer>Paris</answer>', ['paris'], 1.0],
  ['<answer>a\nb</answer>', ['a b'], 1.0],
  ['<answer>théâtre</answer>', ['théâtre'], 1.0],
  ['<answer>éthe x</answer>', ['éthe x'], 1.0],
  ['<answer>the_best</answer>', ['the_best'], 1.0],
  ['<answer>Paris</answer>'.repeat(11), ['paris'], 0.25],
  ['<answer>U.S.A.</answer>', ['usa'], 1.0],
  ["<answer>it's</answer>", ['its'], 1.0],
  ['<answer>a　b</answer>', ['a b'], 1.0],
];
const NORMALIZED: [string, string][] = [
  ['The  Quick, brown fox!', 'quick brown fox'],
  ['An  ant ate THE apple', 'ant ate apple'],
  ['héllo—world', 'héllo—world'],
  ['a_b the_c', 'ab thec'],
  ['Ω the ω', 'ω ω'],
  ['x y z', 'x y z'],
];

describeWithFixtures('gsm8k (verl fixtures)', ['verl/sample.json'], () => {
  const cases = (readFixtureJson('verl/sample.json').cases as VerlCase[]).filter(
    (c) => c.function === 'verl.utils.reward_score.gsm8k.compute_score',
  );

  it('has the strict and flexible fixtures', () => {
    expect(cases.map((c) => c.kwargs.method).sort()).toEqual(['flexible', 'strict']);
  });

  for (const c of cases) {
    it(`${c.kwargs.method} extraction scores as verl`, () => {
      const scores = c.inputs.solution_str.map((s, i) =>
        gsm8k.computeScore(s, c.inputs.ground_truth[i], c.kwargs.method, c.kwargs.format_score, c.kwargs.score),
      );
      expect(scores).toEqual(c.outputs.score);
      if (c.kwargs.method === 'strict') {
        // default_compute_score('openai/gsm8k', ...) is the strict method.
        expect(c.inputs.solution_str.map((s, i) => computeScore('openai/gsm8k', s, c.inputs.ground_truth[i]))).toEqual(
          c.outputs.score,
        );
      }
    });
  }
});

describe('math (\\boxed{} and is_equiv)', () => {
  it.each(MATH_CASES)('%s vs %s → %d', (solution, truth, expected) => {
    expect(math.computeScore(solution, truth)).toBe(expected);
    expect(computeScore('lighteval/MATH', solution, truth)).toBe(expected);
  });

  it.each(MATH_PERCENT_CASES)('%s vs %s → %d', (solution, truth, expected) => {
    expect(math.computeScore(solution, truth)).toBe(expected);
  });

  it('extracts the last box with balanced braces', () => {
    expect(math.lastBoxedOnlyString('a \\boxed{\\frac{1}{2}} b \\boxed{x^{2}} c')).toBe('\\boxed{x^{2}}');
    expect(math.lastBoxedOnlyString('no box')).toBeNull();
    expect(math.removeBoxed('\\boxed{x^{2}}')).toBe('x^{2}');
    expect(math.stripString('\\dfrac12')).toBe('\\frac{1}{2}');
  });

  it('serves every MATH data source', () => {
    for (const source of ['lighteval/MATH', 'DigitalLearningGmbH/MATH-lighteval', 'HuggingFaceH4/MATH-500']) {
      expect(computeScore(source, '\\boxed{\\frac{1}{2}}', '0.5')).toBe(1);
    }
  });
});

describe('QA exact match (Search-R1)', () => {
  it.each(QA_CASES)('%s vs %s → %d', (solution, target, expected) => {
    expect(qaEm.computeScore(solution, { target })).toBe(expected);
    expect(computeScore('searchR1_nq', solution, { target })).toBe(expected);
  });

  it.each(NORMALIZED)('normalizes %s', (text, expected) => {
    expect(qaEm.normalizeAnswer(text)).toBe(expected);
  });

  it("serves verl's and Search-R1's dataset names", () => {
    for (const name of ['nq', 'triviaqa', 'popqa', 'hotpotqa', '2wikimultihopqa', 'musique', 'bamboogle']) {
      expect(computeScore(name, '<answer>The Beatles</answer>', { target: ['beatles'] })).toBe(1);
      expect(computeScore(`searchR1_${name}`, '<answer>Beatles</answer>', { target: ['the beatles'] })).toBe(1);
    }
  });

  it('rejects a ground truth without answers', () => {
    expect(() => computeScore('nq', '<answer>x</answer>', { answers: ['x'] })).toThrow(
      /ground_truth must be \{target: \[answers\]\}/,
    );
  });
});

describe('arithmetic (built-in task)', () => {
  it('is exact integer match before the end token', () => {
    expect(computeScore('arithmetic', '46</s>', '46')).toBe(1);
    expect(computeScore('arithmetic', '46', '46')).toBe(1);
    expect(computeScore('arithmetic', '46</s><pad><pad>', '46')).toBe(1);
    expect(computeScore('arithmetic', '47</s>', '46')).toBe(0);
    expect(computeScore('arithmetic', '4</s>6', '46')).toBe(0);
    expect(computeScore('arithmetic', ' 46</s>', '46')).toBe(0);
    expect(computeScore('arithmetic', '</s>', '46')).toBe(0);
    expect(computeScore('arithmetic', '46+0</s>', '46')).toBe(0);
    expect(computeScore('arithmetic', '-5</s>', '-5')).toBe(1);
    expect(computeScore('arithmetic', '12345678901234567891</s>', '12345678901234567890')).toBe(0);
  });

  it('requires an integer ground truth', () => {
    expect(() => computeScore('arithmetic', '1', 'one')).toThrow(/ground truth must be an integer/);
    expect(() => computeScore('arithmetic', '1', 1)).toThrow(/must be a string/);
  });
});

describe('reward registry', () => {
  it('names the known data sources when one is unknown', () => {
    expect(() => computeScore('openai/gsm8k_v2', 'x', '1')).toThrow(
      /no rule reward for data_source "openai\/gsm8k_v2" \(known: openai\/gsm8k, .*custom_reward_function.path/,
    );
    expect(RULE_DATA_SOURCES).toContain('arithmetic');
  });

  it(
    "takes the score of a number, a boolean or {score, ...extra} (kept whole as verl's reward_extra_info) and " +
      'rejects non-numbers',
    () => {
      expect(toRewardScore(0.5, 'f')).toEqual({ score: 0.5, rewardExtraInfo: null });
      expect(toRewardScore(true, 'f')).toEqual({ score: 1, rewardExtraInfo: null });
      expect(toRewardScore({ score: 1, acc: true }, 'f')).toEqual({
        score: 1,
        rewardExtraInfo: { score: 1, acc: true },
      });
      expect(() => toRewardScore(NaN, 'my_reward')).toThrow(/my_reward returned NaN/);
      expect(() => toRewardScore({ acc: 1 }, 'f')).toThrow(/expected a number or \{score/);
      expect(() => toRewardScore({ score: '1' }, 'f')).toThrow(
        'f returned {"score":"1"}; score must be a finite number',
      );
      expect(() => toRewardScore({ score: NaN, acc: Infinity }, 'f')).toThrow(
        'f returned {"score":NaN,"acc":Infinity}; score must be a finite number',
      );
      expect(() => toRewardScore('0.5', 'f')).toThrow('f returned "0.5"; expected a number or {score, ...}');
    },
  );
});

describe('custom reward function', () => {
  it('loads the named export of a TS module and calls it as verl does', async () => {
    const fn = await loadCustomRewardFunction({ path: CUSTOM_REWARD, name: 'compute_score', timeout: 60 });
    const result = toRewardScore(await fn('my_source', '42', '42', { penalty: 0.1 }), 'compute_score');
    expect(result.score).toBeCloseTo(0.8, 12);
    expect(result.rewardExtraInfo).toEqual({ score: result.score, correct: true, source: 'my_source' });
  });

  it('errors clearly on a missing file or function', async () => {
    await expect(
      loadCustomRewardFunction({ path: '/nonexistent/reward.ts', name: 'compute_score', timeout: 60 }),
    ).rejects.toThrow(/custom_reward_function.path: \/nonexistent\/reward.ts does not exist/);
    await expect(loadCustomRewardFunction({ path: CUSTOM_REWARD, name: 'notAFunction', timeout: 60 })).rejects.toThrow(
      /exports no function "notAFunction" \(its functions: compute_score\)/,
    );
  });

  const modules = makeTempDirSync('custom-reward-');
  /** A reward module with this source, loaded as custom_reward_function with a timeout in seconds. */
  async function rewardFrom(name: string, source: string, timeout = 60) {
    const path = join(modules, name);
    writeFileSync(path, source);
    return { path, fn: await loadCustomRewardFunction({ path, name: 'compute_score', timeout }) };
  }

  it(
    'a call that throws names the data_source, ground truth, row index and response, and stops the ' + 'worker',
    async () => {
      const { path, fn } = await rewardFrom(
        'throws.mjs',
        'export function compute_score(source) { if (source === "my_source") return undefined.x; return 1; }\n',
      );
      expect(await fn('other', 'x', '1', null)).toBe(1);
      const error =
        `custom_reward_function compute_score of ${path} (data_source "my_source", ground_truth "42", ` +
        `extra_info.index 7, response "the answer") threw: Cannot read properties of undefined (reading 'x')`;
      await expect(fn('my_source', 'the answer', '42', { index: 7 })).rejects.toThrow(error);
      await expect(fn('other', 'x', '1', null)).rejects.toThrow(error);
    },
  );

  it('a call that never settles stops after custom_reward_function.timeout seconds, naming the call', async () => {
    const { fn } = await rewardFrom(
      'never-settles.mjs',
      'export function compute_score() { return new Promise(() => {}); }\n',
      0.2,
    );
    await expect(fn('my_source', 'x', '1', null)).rejects.toThrow(
      /^custom_reward_function compute_score of \S+ \(data_source "my_source".*did not return within custom_reward_function.timeout=0.2 s$/,
    );
  });

  it(
    'a synchronous loop is stopped at the timeout with its worker: the call and the calls queued behind it fail, ' +
      'later calls too',
    async () => {
      const { fn } = await rewardFrom(
        'loops.mjs',
        'export function compute_score(source) { if (source === "loop") while (true) {} return 1; }\n',
        1,
      );
      // The trainer's clock is faked: the loop's timeout passes when the test moves it, after the first call has
      // answered however long a loaded machine took (on a real clock it would have to answer within 1 s).
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      try {
        const [fine, looped, queued] = [
          fn('fine', 'a', '1', null),
          fn('loop', 'b', '1', { index: 3 }),
          fn('fine', 'c', '1', null),
        ];
        await expect(fine).resolves.toBe(1);
        const stopped = Promise.all([
          expect(looped).rejects.toThrow(
            /^custom_reward_function compute_score of \S+ \(data_source "loop", ground_truth "1", extra_info.index 3, response "b"\) did not return within custom_reward_function.timeout=1 s$/,
          ),
          expect(queued).rejects.toThrow(/data_source "loop".*did not return within/),
        ]);
        let timedOut = false;
        Promise.resolve(looped).catch(() => (timedOut = true));
        await vi.advanceTimersByTimeAsync(999);
        expect(timedOut).toBe(false);
        await vi.advanceTimersByTimeAsync(1);
        await stopped;
      } finally {
        vi.useRealTimers();
      }
      await expect(fn('fine', 'd', '1', null)).rejects.toThrow(/data_source "loop".*did not return within/);
    },
  );

  it('an idle worker does not keep the process alive: a script that scored with it exits by itself', () => {
    const script = join(modules, 'scores-once.mjs');
    writeFileSync(
      script,
      `import { loadCustomRewardFunction } from ${JSON.stringify(CUSTOM_REWARD_NODE)};\n` +
        `const fn = await loadCustomRewardFunction({ path: ${JSON.stringify(CUSTOM_REWARD)}, name: 'compute_score', ` +
        `timeout: 60 });\n` +
        `console.log(JSON.stringify(await fn('s', '42', '42', null)));\n`,
    );
    const run = spawnSync(process.execPath, ['--import', NODE_LOADER, script], { encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('{"score":1,"correct":true,"source":"s"}\n');
    expect(run.status).toBe(0);
  });

  it('the timeout is per call: a batch of calls, each within it and longer than it together, returns in order', async () => {
    // The trainer's clock is faked and moved by the test, 1.5 s per call against a 2 s timeout (6 s in all); the
    // worker answers a call only when the test lets it, after the move, so no real time decides anything.
    const { fn } = await rewardFrom(
      'paced.mjs',
      'const go = new BroadcastChannel("paced-reward"); go.unref();\n' +
        'let permits = 0; let wake = () => {};\n' +
        'go.onmessage = () => { permits++; wake(); };\n' +
        'export async function compute_score(s, text) {\n' +
        '  while (permits === 0) await new Promise((r) => (wake = r));\n' +
        '  permits--;\n' +
        '  return { score: Number(text) };\n' +
        '}\n',
      2,
    );
    const go = new BroadcastChannel('paced-reward');
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const calls = ['0', '1', '2', '0'].map((text) => fn('s', text, '', null));
      for (const call of calls) {
        await vi.advanceTimersByTimeAsync(1500);
        go.postMessage('answer');
        await call;
      }
      expect(await Promise.all(calls)).toEqual([0, 1, 2, 0].map((score) => ({ score })));
    } finally {
      vi.useRealTimers();
      go.close();
    }
  });

  it(
    'a module that never finishes importing, a call that exits its thread or returns what cannot cross threads: one ' +
      'error naming it',
    async () => {
      await expect(
        rewardFrom('import-loops.mjs', 'while (true) {}\nexport function compute_score() { return 1; }\n', 0.5),
      ).rejects.toThrow(
        /^custom_reward_function.path: cannot load \S+import-loops.mjs: importing it did not finish within custom_reward_function.timeout=0.5 s$/,
      );
      const exits = (await rewardFrom('exits.mjs', 'export function compute_score() { process.exit(3); }\n')).fn;
      await expect(exits('s', 'x', '1', null)).rejects.toThrow(
        /^custom_reward_function compute_score of \S+exits.mjs \(data_source "s".*\) ended its worker thread \(exit code 3\)$/,
      );
      const unsendable = (
        await rewardFrom('unsendable.mjs', 'export function compute_score() { return { score: 1, judge: () => 1 }; }\n')
      ).fn;
      await expect(unsendable('s', 'x', '1', null)).rejects.toThrow(
        /\(data_source "s".*\) returned a value that cannot be passed back to the trainer \(.*could not be cloned/,
      );
    },
  );
});

// Expected scores recorded by running Search-R1's compute_score_subem (qa_em.py, transcribed to Python) on these
// inputs.
const QA_SUBEM_CASES: [string, string | string[], number][] = [
  ['<answer>The Eiffel Tower in Paris</answer>', ['eiffel tower'], 1.0],
  ['<answer>Paris</answer>', ['Paris, France'], 0.0],
  ['<answer>Anne</answer>', ['nne'], 1.0],
  ['<answer>Rome</answer>', ['Paris', 'rome'], 1.0],
  ['<answer>Rome</answer>', 'Paris', 0.0],
  ['no tags', ['Paris'], 0],
  ['<answer>x</answer><answer>Paris, France</answer>', 'paris', 1.0],
  ['<answer>Paris</answer>'.repeat(11), ['paris'], 1.0],
  ['<answer>Rome</answer>', ['The'], 1.0],
  ['<answer>U.S.A. team</answer>', ['usa'], 1.0],
  ['<answer>théâtre national</answer>', ['Théâtre'], 1.0],
];

describe('QA substring exact match (Search-R1 compute_score_subem)', () => {
  it.each(QA_SUBEM_CASES)('%s vs %s → %d', (solution, target, expected) => {
    expect(qaEm.computeScoreSubem(solution, { target })).toBe(expected);
    expect(computeScore('nq_subem', solution, { target })).toBe(expected);
  });

  it('scores a wrong answer formatScore and a right one score', () => {
    expect(qaEm.computeScoreSubem('<answer>Rome</answer>', { target: ['Paris'] }, 0.1)).toBe(0.1);
    expect(qaEm.computeScoreSubem('<answer>Paris</answer>', { target: ['Paris'] }, 0.1, 2)).toBe(2);
    expect(qaEm.computeScoreSubem('Paris', { target: ['Paris'] }, 0.1)).toBe(0);
  });

  it('applies to any data_source ending in _subem; the plain names keep exact match', () => {
    const solution = '<answer>The Eiffel Tower in Paris</answer>';
    for (const source of ['nq_subem', 'searchR1_hotpotqa_subem', 'my_corpus_subem']) {
      expect(computeScore(source, solution, { target: ['eiffel tower'] })).toBe(1);
    }
    expect(computeScore('nq', solution, { target: ['eiffel tower'] })).toBe(0);
    expect(() => computeScore('nq_subem', solution, { answers: ['x'] })).toThrow(
      /data_source "nq_subem": reward_model.ground_truth must be \{target/,
    );
    expect(() => computeScore('nq_subemx', solution, { target: ['x'] })).toThrow(/any name ending in _subem/);
  });
});
