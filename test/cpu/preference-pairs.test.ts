// Preference rows in TRL's and OpenRLHF's shapes become the token sequences the reward model scores.
import { describe, it, expect } from 'vitest';
import { BUILTIN_TASKS } from '../../ppo/tasks/builtin-tasks.ts';
import { builtinTokenizer } from '../../ppo/jobs/builtin-run.ts';
import { buildPreferencePairs, type PreferenceColumns } from '../../ppo/reward-model/preference-pairs.ts';
import { applyChatTemplate } from '../../models/chat-template.ts';

const { tokenizer, template } = builtinTokenizer(BUILTIN_TASKS.arithmetic);
const TRL: PreferenceColumns = {
  promptKey: 'prompt',
  chosenKey: 'chosen',
  rejectedKey: 'rejected',
  marginKey: 'margin',
};
const build = (rows: Record<string, unknown>[], columns = TRL, maxLength = 64) =>
  buildPreferencePairs(
    rows.map((row, i) => ({ row, where: `pairs.jsonl line ${i + 1}` })),
    { ...columns, tokenizer, template, maxLength },
  );
const eos = tokenizer.special.eos!.id;
const text = async (s: string) => [...(await tokenizer.encode(s)), eos];

describe('preference pairs', () => {
  it('reads text with a shared prompt, text with the prompt inside (implicit), and TRL margins', async () => {
    const { pairs } = await build([
      { prompt: '1+2=', chosen: '3', rejected: '4', margin: 0.5 },
      { chosen: '1+2=3', rejected: '1+2=4' },
    ]);
    expect(pairs[0]).toEqual({
      where: 'pairs.jsonl line 1',
      chosen: await text('1+2=3'),
      rejected: await text('1+2=4'),
      margin: 0.5,
    });
    expect(pairs[1]).toMatchObject({ chosen: pairs[0].chosen, rejected: pairs[0].rejected, margin: 0 });
  });

  it('renders chat messages through the chat template, with or without a prompt conversation', async () => {
    const user = { role: 'user', content: '1+2=' };
    const answer = (content: string) => [{ role: 'assistant', content }];
    const { pairs } = await build([
      { prompt: [user], chosen: answer('3'), rejected: answer('3 ') },
      { chosen: [user, ...answer('3')], rejected: [user, ...answer('3 ')] },
    ]);
    const expected = (await applyChatTemplate(tokenizer, template, [user, ...answer('3')])).ids;
    expect(pairs[0].chosen).toEqual(expected);
    expect(pairs[0].chosen[pairs[0].chosen.length - 1]).toBe(eos);
    expect(pairs[1]).toMatchObject({ chosen: pairs[0].chosen, rejected: pairs[0].rejected });
    expect(pairs[0].rejected).not.toEqual(pairs[0].chosen);
  });

  it('takes OpenRLHF column names, drops pairs over max_length and names a bad row', async () => {
    const columns = { promptKey: 'input', chosenKey: 'preferred', rejectedKey: 'dispreferred', marginKey: 'margin' };
    const { pairs, dropped } = await build(
      [
        { input: '1+2=', preferred: '3', dispreferred: '4' },
        { input: '1+2=', preferred: '3333333', dispreferred: '4' },
      ],
      columns,
      6,
    );
    expect(pairs).toHaveLength(1);
    expect(dropped).toBe(1);
    await expect(build([{ prompt: [{ role: 'user', content: '1' }], chosen: '3', rejected: '4' }])).rejects.toThrow(
      "pairs.jsonl line 1: 'chosen' is text but 'prompt' is not",
    );
    await expect(build([{ chosen: '3' }])).rejects.toThrow(
      "pairs.jsonl line 1: 'rejected' is missing (columns: chosen)",
    );
    await expect(build([{ chosen: '3', rejected: '4', margin: 'big' }])).rejects.toThrow(
      '\'margin\' is "big", expected a number',
    );
  });
});
