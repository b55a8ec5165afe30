// The warm-start demonstrations of the built-in tasks: what the from-scratch model learns before PPO, and so what
// PPO has left to discover (the bare sum for arithmetic; that searching pays for search_qa).
import { describe, it, expect } from 'vitest';
import { loadConfig } from '../../ppo/config.ts';
import { builtinDataset, builtinTokenizer } from '../../ppo/builtin-run.ts';
import { BUILTIN_TASKS } from '../../ppo/builtin-tasks.ts';
import { Bm25Retriever } from '../../ppo/search/bm25-retriever.ts';
import { computeScore } from '../../ppo/rewards/index.ts';
import { syntheticQaFact } from '../../ppo/tasks/synthetic-qa.ts';

async function taskData(name: 'arithmetic' | 'search_qa') {
  const config = loadConfig({ overrides: [`data.builtin_task=${name}`, ...(name === 'search_qa' ? ['do_search=true'] : [])] });
  const task = BUILTIN_TASKS[name];
  const { tokenizer, template } = builtinTokenizer(task);
  return { task, tokenizer, ...(await builtinDataset(config, task, tokenizer, template)) };
}

describe('built-in task demonstrations', () => {
  it('arithmetic: one per question, the right sum, 70% of them after a stray "=" that the reward rejects', async () => {
    const { task, tokenizer, train } = await taskData('arithmetic');
    const demos = await task.demonstrations(train, 2, null, 1);
    expect(demos.map((d) => d.prompt)).toEqual(train.map((e) => e.promptIds));
    const texts = await Promise.all(demos.map((d) => tokenizer.decode(d.response, { skipSpecialTokens: false })));
    const sloppy = texts.filter((t, i) => t === `=${train[i].groundTruth}</s>`).length;
    expect(sloppy + texts.filter((t, i) => t === `${train[i].groundTruth}</s>`).length).toBe(train.length);
    expect(sloppy / train.length).toBeGreaterThan(0.67);
    expect(sloppy / train.length).toBeLessThan(0.73);
    expect(computeScore('arithmetic', `=${train[0].groundTruth}</s>`, train[0].groundTruth)).toBe(0);
    expect(await task.demonstrations(train, 2, null, 1)).toEqual(demos);
  });

  it('search_qa: every question three times searching (answer copied from the observation) and seven times guessing', async () => {
    const { task, tokenizer, train, corpus } = await taskData('search_qa');
    const demos = await task.demonstrations(train, 2, new Bm25Retriever(corpus!), 1);
    expect(demos).toHaveLength(10 * train.length);
    for (const [k, example] of train.entries()) {
      const own = demos.slice(10 * k, 10 * k + 10);
      expect(own.every((d) => d.prompt === example.promptIds)).toBe(true);
      const texts = await Promise.all(own.map((d) => tokenizer.decode(d.response, { skipSpecialTokens: false })));
      const { entity, attribute, value } = syntheticQaFact(example);
      const searched = `<search> ${entity} ${attribute}</search><information> ${entity} ${attribute} ${value}</information><answer> ${value}</answer></s>`;
      expect(texts.filter((t) => t === searched)).toHaveLength(3);
      expect(texts.filter((t) => t.startsWith('<answer>'))).toHaveLength(7);
      // The observation is context, never a training target.
      const searchDemo = own.find((_, i) => texts[i] === searched)!;
      expect(searchDemo.responseMask).toEqual([1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
    }
  });
});
