// The warm-start demonstrations of the built-in tasks: what the from-scratch model learns before PPO, and so what
// PPO has left to discover (the bare sum for arithmetic; that searching pays for search_qa).
import { describe, it, expect } from 'vitest';
import { loadConfig } from '../../ppo/config.ts';
import { builtinDataset, builtinTokenizer } from '../../ppo/jobs/builtin-run.ts';
import { BUILTIN_TASKS } from '../../ppo/tasks/builtin-tasks.ts';
import { stageContinues, stageLr, withTotalSteps } from '../../ppo/tasks/default-job.ts';
import { Bm25Retriever } from '../../ppo/environments/search/bm25-retriever.ts';
import { computeScore } from '../../ppo/rewards/index.ts';
import { syntheticQaFact } from '../../ppo/tasks/synthetic-qa.ts';

async function taskData(name: 'arithmetic' | 'search_qa') {
  const config = loadConfig({
    overrides: [`data.builtin_task=${name}`, ...(name === 'search_qa' ? ['do_search=true'] : [])],
  });
  const task = BUILTIN_TASKS[name];
  const { tokenizer, template } = builtinTokenizer(task);
  return { task, tokenizer, ...(await builtinDataset(config, task, tokenizer, template)) };
}

describe('built-in task demonstrations', () => {
  it(
    'arithmetic: pretraining on every right sum, then SFT with 70% of the sums followed by a space the reward ' +
      'rejects',
    async () => {
      const { task, tokenizer, train } = await taskData('arithmetic');
      const stages = await task.warmStart(train, 2, null, 1);
      expect(stages.map((s) => s.name)).toEqual(['pretraining', 'SFT']);
      const [pretraining, sft] = stages;
      expect(sft.steps).toBeLessThan(pretraining.steps);
      const decoded = (examples: typeof sft.examples) =>
        Promise.all(examples.map((d) => tokenizer.decode(d.response, { skipSpecialTokens: false })));
      for (const stage of stages) expect(stage.examples.map((d) => d.prompt)).toEqual(train.map((e) => e.promptIds));
      expect(await decoded(pretraining.examples)).toEqual(train.map((e) => `${e.groundTruth}</s>`));
      const texts = await decoded(sft.examples);
      const sloppy = texts.filter((t, i) => t === `${train[i].groundTruth} </s>`).length;
      expect(sloppy + texts.filter((t, i) => t === `${train[i].groundTruth}</s>`).length).toBe(train.length);
      expect(sloppy / train.length).toBeGreaterThan(0.67);
      expect(sloppy / train.length).toBeLessThan(0.73);
      expect(computeScore('arithmetic', `${train[0].groundTruth} </s>`, train[0].groundTruth)).toBe(0);
      expect(await task.warmStart(train, 2, null, 1)).toEqual(stages);
    },
  );

  it(
    'search_qa: every question three times searching (answer copied from the observation) and seven times ' +
      'guessing',
    async () => {
      const { task, tokenizer, train, corpus } = await taskData('search_qa');
      const stages = await task.warmStart(train, 2, new Bm25Retriever(corpus!), 1);
      expect(stages.map((s) => s.name)).toEqual(['SFT']);
      const demos = stages[0].examples;
      expect(demos).toHaveLength(10 * train.length);
      for (const [k, example] of train.entries()) {
        const own = demos.slice(10 * k, 10 * k + 10);
        expect(own.every((d) => d.prompt === example.promptIds)).toBe(true);
        const texts = await Promise.all(own.map((d) => tokenizer.decode(d.response, { skipSpecialTokens: false })));
        const { entity, attribute, value } = syntheticQaFact(example);
        const searched =
          `<search> ${entity} ${attribute}</search><information> ${entity} ${attribute} ` +
          `${value}</information><answer> ${value}</answer></s>`;
        expect(texts.filter((t) => t === searched)).toHaveLength(3);
        expect(texts.filter((t) => t.startsWith('<answer>'))).toHaveLength(7);
        // The observation is context, never a training target.
        const searchDemo = own.find((_, i) => texts[i] === searched)!;
        expect(searchDemo.responseMask).toEqual([1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
      }
    },
  );

  it("a total step count (the demo's) is shared among the stages in their proportions, at least one each", () => {
    const stages = [
      { name: 'pretraining', steps: 600, lr: 3e-3, examples: [] },
      { name: 'SFT', steps: 100, lr: 1e-3, examples: [] },
    ];
    const steps = (total: number) => withTotalSteps(stages, total).map((s) => s.steps);
    expect(steps(700)).toEqual([600, 100]);
    expect(steps(150)).toEqual([129, 21]);
    expect(steps(20)).toEqual([17, 3]);
    expect(steps(1)).toEqual([1, 1]);
    expect(withTotalSteps(stages, 150).map((s) => [s.name, s.lr])).toEqual([
      ['pretraining', 3e-3],
      ['SFT', 1e-3],
    ]);
  });

  it('a gated stage runs its schedule, then restarted cosine cycles until its mean loss passes the gate', () => {
    const until = { meanLossBelow: 0.04, window: 3, maxSteps: 20, lr: 1e-3, cycleSteps: 4 };
    const stage = { name: 'pretraining', steps: 8, lr: 3e-3, examples: [], until };
    // The schedule: a 10-step warmup under a cosine from the peak towards a tenth at its end.
    expect(stageLr(stage, 0)).toBeCloseTo(3e-4, 12);
    expect(stageLr(stage, 7)).toBeCloseTo(3e-3 * 0.8 * (0.1 + 0.45 * (1 + Math.cos((7 * Math.PI) / 8))), 12);
    // Past it, each cycle starts at the gate's rate and decays towards a tenth of it.
    for (const start of [8, 12, 16]) {
      expect(stageLr(stage, start)).toBe(1e-3);
      expect(stageLr(stage, start + 2)).toBeCloseTo(1e-3 * 0.55, 12);
      expect(stageLr(stage, start + 3)).toBeLessThan(stageLr(stage, start + 2));
    }
    const losses = (n: number, last: number) => [...Array.from({ length: n - 3 }, () => 1), last, last, last];
    expect(stageContinues(stage, losses(7, 0))).toBe(true); // inside the schedule the gate is not asked
    expect(stageContinues(stage, losses(8, 0.05))).toBe(true);
    expect(stageContinues(stage, losses(8, 0.03))).toBe(false);
    expect(stageContinues(stage, losses(20, 0.05))).toBe(false); // the cap
    expect(stageContinues({ ...stage, until: undefined }, losses(8, 0.05))).toBe(false);
  });
});
