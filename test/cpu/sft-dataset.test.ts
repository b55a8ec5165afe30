// verl's SFT rows as examples: single-turn prompt/response columns (nested dict keys too), multi-turn conversations
// trained on the assistant turns only, and data.truncation.
import { describe, it, expect } from 'vitest';
import { BUILTIN_TASKS } from '../../ppo/tasks/builtin-tasks.ts';
import { builtinTokenizer } from '../../ppo/jobs/builtin-run.ts';
import { buildSftExamples, type SftDataOptions } from '../../ppo/sft/sft-dataset.ts';
import { buildSftBatch } from '../../ppo/sft/sft-trainer.ts';

const { tokenizer, template } = builtinTokenizer(BUILTIN_TASKS.arithmetic);
const options: SftDataOptions = {
  prompt_key: 'question',
  response_key: 'answer',
  prompt_dict_keys: null,
  response_dict_keys: null,
  multiturn: { enable: false, messages_key: 'messages' },
  max_length: 64,
  truncation: 'error',
  tokenizer,
  template,
};
const rows = (...list: Record<string, unknown>[]) => list.map((row, i) => ({ row, where: `train.parquet row ${i}` }));
const decode = (ids: readonly number[]) => tokenizer.decode(ids);

describe('SFT dataset', () => {
  it(
    'single turn: the chat-templated prompt is context, the response and EOS are trained; dict keys reach nested ' +
      'text',
    async () => {
      const [flat] = await buildSftExamples(rows({ question: '1+2=', answer: '3' }), options);
      expect(await decode(flat.prompt)).toBe('<|user|>1+2=<|assistant|>');
      expect(await decode(flat.response)).toBe('3</s>');
      expect(flat.responseMask).toEqual([1, 1]);
      const [nested] = await buildSftExamples(rows({ extra_info: { question: '1+2=', answer: '3' } }), {
        ...options,
        prompt_key: 'extra_info',
        response_key: 'extra_info',
        prompt_dict_keys: ['question'],
        response_dict_keys: ['answer'],
      });
      expect(nested).toEqual(flat);
      await expect(buildSftExamples(rows({ question: '1+2=' }), options)).rejects.toThrow(
        "train.parquet row 0: 'answer' is missing (columns: question)",
      );
    },
  );

  it(
    'multi-turn: the loss mask covers exactly the assistant turns (content and end token), not user turns or ' +
      'headers',
    async () => {
      const messages = [
        { role: 'user', content: '1+2=' },
        { role: 'assistant', content: '3' },
        { role: 'user', content: '3+4=' },
        { role: 'assistant', content: '7' },
      ];
      const [example] = await buildSftExamples(rows({ messages }), {
        ...options,
        multiturn: { enable: true, messages_key: 'messages' },
      });
      const ids = [...example.prompt, ...example.response];
      expect(await decode(ids)).toBe(template.render(messages));
      const mask = [...example.prompt.map(() => 0), ...example.responseMask!];
      const trained = await Promise.all(ids.map(async (id, i) => (mask[i] ? decode([id]) : '.')));
      // Trained tokens in order, '.' for context: '<|user|>1+2=<|assistant|>' is context, '3</s>' trained, and so on.
      expect(trained.join('')).toBe(`${'.'.repeat(6)}3</s>${'.'.repeat(6)}7</s>`);
      // The batch trains on the next-token predictions of exactly those tokens.
      const batch = buildSftBatch([example], ids.length, 0);
      const predicted = [...batch.lossWeights].flatMap((w, t) => (w !== 0 ? [t + 1] : []));
      expect(predicted).toEqual(mask.flatMap((m, t) => (m ? [t] : [])));
    },
  );

  it(
    'data.truncation: error names the row, left keeps the end, right the start, each token keeping its ' + 'mask',
    async () => {
      const long = rows({ question: '11+22=', answer: '33' });
      await expect(buildSftExamples(long, { ...options, max_length: 5 })).rejects.toThrow(
        'train.parquet row 0: 11 tokens exceed data.max_length=5',
      );
      const [left] = await buildSftExamples(long, { ...options, max_length: 5, truncation: 'left' });
      expect(await decode([...left.prompt, ...left.response])).toBe('=<|assistant|>33</s>');
      expect(left.responseMask).toEqual([1, 1, 1]);
      const [right] = await buildSftExamples(long, { ...options, max_length: 9, truncation: 'right' });
      expect(await decode([...right.prompt, ...right.response])).toBe('<|user|>11+22=<|assistant|>3');
      await expect(buildSftExamples(long, { ...options, max_length: 5, truncation: 'right' })).rejects.toThrow(
        'no assistant tokens to train on',
      );
    },
  );
});
