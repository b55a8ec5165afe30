import { describe, it, expect, beforeAll } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { CharTokenizer } from '../../models/char-tokenizer.ts';
import { JsTokenizer } from '../../models/tokenizer.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { loadConfig } from '../../ppo/config.ts';
import {
  buildRlDataset,
  epochPermutation,
  parseJsonl,
  PromptSampler,
  totalTrainingSteps,
  truncatePrompt,
  type DataCursor,
  type RlDatasetOptions,
} from '../../ppo/data/dataset.ts';
import { loadRlDataset, readRlRecords } from '../../ppo/data/dataset-node.ts';
import { makeTempDirSync } from '../support/temp-dir.ts';

// A real tokenizer.json (one token per printable character) and a ChatML template, through the same classes a
// Hugging Face model directory loads into.
const chars = new CharTokenizer({
  specialTokens: ['<pad>', '<|im_start|>', '<|im_end|>'],
  characters: `\n${Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('')}`,
});
const tokenizer = JsTokenizer.fromJson(chars.toHfTokenizerJson(), { eos_token: '<|im_end|>', pad_token: '<pad>' });
const template = new ChatTemplate(
  {
    chat_template:
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}" +
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
  },
  tokenizer.special,
);

/** Rows in the layout of verl's examples/data_preprocess/gsm8k.py. */
const ROWS = [
  { q: 'Natalia sold 48 clips. How many?', a: '72' },
  { q: 'What is 2+3?', a: '5' },
  { q: 'A much longer question that goes on and on about apples and oranges?', a: '10' },
  { q: 'Short?', a: '1' },
].map(({ q, a }, index) => ({
  data_source: 'openai/gsm8k',
  prompt: [{ content: `${q} Let's think step by step and output the final answer after "####".`, role: 'user' }],
  ability: 'math',
  reward_model: { ground_truth: a, style: 'rule' },
  extra_info: { answer: `#### ${a}`, index, question: q, split: 'train' },
}));

const utf8 = (name: string) =>
  ({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' }) as const;

/** The schema pyarrow writes for those rows: prompt is list<struct<content, role>>, the others structs. */
function writeVerlParquet(path: string): void {
  const column = <K extends keyof (typeof ROWS)[number]>(name: K) => ({
    name,
    data: ROWS.map((r) => (name === 'extra_info' ? { ...r.extra_info, index: BigInt(r.extra_info.index) } : r[name])),
  });
  const buffer = parquetWriteBuffer({
    columnData: [
      column('data_source'),
      column('prompt'),
      column('ability'),
      column('reward_model'),
      column('extra_info'),
    ],
    schema: [
      { name: 'schema', num_children: 5 },
      utf8('data_source'),
      { name: 'prompt', repetition_type: 'OPTIONAL', num_children: 1, converted_type: 'LIST' },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', repetition_type: 'OPTIONAL', num_children: 2 },
      utf8('content'),
      utf8('role'),
      utf8('ability'),
      { name: 'reward_model', repetition_type: 'OPTIONAL', num_children: 2 },
      utf8('ground_truth'),
      utf8('style'),
      { name: 'extra_info', repetition_type: 'OPTIONAL', num_children: 4 },
      utf8('answer'),
      { name: 'index', type: 'INT64', repetition_type: 'OPTIONAL' },
      utf8('question'),
      utf8('split'),
    ],
  });
  writeFileSync(path, new Uint8Array(buffer));
}

function options(overrides: string[] = []): RlDatasetOptions {
  return { ...loadConfig({ overrides }).data, tokenizer, template };
}

describe('RL dataset files', () => {
  let dir: string;
  beforeAll(() => {
    dir = makeTempDirSync('rl-dataset-');
    writeVerlParquet(join(dir, 'train.parquet'));
    writeFileSync(join(dir, 'train.jsonl'), `${ROWS.map((r) => JSON.stringify(r)).join('\n')}\n`);
  });

  it("reads verl's nested Parquet schema", async () => {
    const records = await readRlRecords(join(dir, 'train.parquet'));
    expect(records.map((r) => r.row)).toEqual(ROWS);
    expect(records[2].where).toBe(`${join(dir, 'train.parquet')} row 2`);
  });

  it('reads JSONL into the same rows and concatenates files in order', async () => {
    const jsonl = await readRlRecords(join(dir, 'train.jsonl'));
    expect(jsonl.map((r) => r.row)).toEqual(ROWS);
    const both = await readRlRecords([join(dir, 'train.parquet'), join(dir, 'train.jsonl')]);
    expect(both).toHaveLength(8);
    expect(both[5].where).toBe(`${join(dir, 'train.jsonl')} line 2`);
  });

  it('applies the chat template and tokenizes without extra special tokens', async () => {
    const { examples, filtered } = await loadRlDataset(join(dir, 'train.parquet'), options());
    expect(filtered).toBe(0);
    const first = examples[0];
    expect(first.promptText).toBe(`<|im_start|>user\n${ROWS[0].prompt[0].content}<|im_end|>\n<|im_start|>assistant\n`);
    expect(first.promptIds).toEqual(chars.encode(first.promptText));
    expect(first.dataSource).toBe('openai/gsm8k');
    expect(first.groundTruth).toBe('72');
    expect(first.extraInfo).toEqual({
      answer: '#### 72',
      index: 0,
      question: ROWS[0].extra_info.question,
      split: 'train',
    });
  });

  it('errors clearly on unreadable or unknown files', async () => {
    await expect(readRlRecords(join(dir, 'missing.parquet'))).rejects.toThrow(/missing.parquet: cannot read .*ENOENT/);
    writeFileSync(join(dir, 'train.csv'), 'a,b\n');
    await expect(readRlRecords(join(dir, 'train.csv'))).rejects.toThrow(/expected a .parquet or .jsonl file/);
    writeFileSync(join(dir, 'bad.parquet'), 'not parquet');
    await expect(readRlRecords(join(dir, 'bad.parquet'))).rejects.toThrow(/bad.parquet: cannot read as Parquet/);
  });
});

describe('RL dataset rows', () => {
  const records = ROWS.map((row, i) => ({ row: row as Record<string, unknown>, where: `rows ${i}` }));
  const longest = Math.max(
    ...ROWS.map((r) => chars.encode(template.render(r.prompt, { addGenerationPrompt: true })).length),
  );
  const shortest = Math.min(
    ...ROWS.map((r) => chars.encode(template.render(r.prompt, { addGenerationPrompt: true })).length),
  );
  const limit = shortest + 10;

  it('filter_overlong_prompts drops prompts over max_prompt_length', async () => {
    const { examples, filtered } = await buildRlDataset(
      records,
      options([`data.max_prompt_length=${limit}`, 'data.filter_overlong_prompts=true']),
    );
    expect(filtered).toBe(
      ROWS.filter((r) => chars.encode(template.render(r.prompt, { addGenerationPrompt: true })).length > limit).length,
    );
    expect(filtered).toBeGreaterThan(0);
    expect(examples.every((e) => e.promptIds.length <= limit)).toBe(true);
    expect(examples.map((e) => e.index)).toEqual(examples.map((_, i) => i));
  });

  it('truncation=error names the row and the fixes', async () => {
    await expect(buildRlDataset(records, options([`data.max_prompt_length=${limit}`]))).rejects.toThrow(
      /rows 0: prompt is \d+ tokens, longer than data.max_prompt_length=\d+ — .*filter_overlong_prompts/,
    );
    const all = await buildRlDataset(records, options([`data.max_prompt_length=${longest}`]));
    expect(all.examples).toHaveLength(ROWS.length);
  });

  it('truncates left, right and middle as verl', async () => {
    const ids = [1, 2, 3, 4, 5, 6, 7];
    expect(truncatePrompt(ids, 4, 'left', 'x')).toEqual([4, 5, 6, 7]);
    expect(truncatePrompt(ids, 4, 'right', 'x')).toEqual([1, 2, 3, 4]);
    expect(truncatePrompt(ids, 5, 'middle', 'x')).toEqual([1, 2, 5, 6, 7]);
    expect(truncatePrompt(ids, 7, 'error', 'x')).toBe(ids);
    const { examples } = await buildRlDataset(
      records,
      options([`data.max_prompt_length=${limit}`, 'data.truncation=left']),
    );
    const full = chars.encode(template.render(ROWS[2].prompt, { addGenerationPrompt: true }));
    expect(examples[2].promptIds).toEqual(full.slice(full.length - limit));
  });

  it('honours prompt_key and reward_fn_key', async () => {
    const renamed = [
      {
        row: { question_msgs: ROWS[1].prompt, source: 'lighteval/MATH', reward_model: { ground_truth: '5' } },
        where: 'r',
      },
    ];
    const { examples } = await buildRlDataset(
      renamed,
      options(['data.prompt_key=question_msgs', 'data.reward_fn_key=source']),
    );
    expect(examples[0]).toMatchObject({ dataSource: 'lighteval/MATH', groundTruth: '5', extraInfo: {} });
  });

  it('rejects rows outside the schema with the row and field named', async () => {
    const bad = (row: Record<string, unknown>) => buildRlDataset([{ row, where: 'f.jsonl line 3' }], options());
    await expect(bad({ data_source: 'x', reward_model: { ground_truth: '1' } })).rejects.toThrow(
      /f.jsonl line 3: missing column\(s\) prompt/,
    );
    await expect(bad({ ...ROWS[0], prompt: 'hello' })).rejects.toThrow(
      /prompt must be a non-empty list of chat messages/,
    );
    await expect(bad({ ...ROWS[0], prompt: [{ role: 'user' }] })).rejects.toThrow(
      /prompt\[0\] must be \{role: string, content: string\}/,
    );
    await expect(bad({ ...ROWS[0], reward_model: { style: 'rule' } })).rejects.toThrow(
      /reward_model must be \{ground_truth, ...\}/,
    );
    await expect(bad({ ...ROWS[0], data_source: 3 })).rejects.toThrow(/data_source must be a string/);
    expect(() => parseJsonl('{"a": 1}\n{oops\n', 'f.jsonl')).toThrow(/f.jsonl line 2: not valid JSON/);
  });
});

describe('prompt sampler', () => {
  const size = 10;
  const batchSize = 3;

  /** Batches drawn from `start` on, each with its cursor's JSON round trip, as a checkpoint stores it. */
  function draw(
    sampler: PromptSampler,
    start: DataCursor,
    count: number,
  ): { batches: number[][]; epochs: number[]; cursor: DataCursor } {
    const batches: number[][] = [];
    const epochs: number[] = [];
    let cursor = start;
    for (let i = 0; i < count; i++) {
      const batch = sampler.batchAt(cursor);
      batches.push(batch.indices);
      epochs.push(batch.epoch);
      cursor = JSON.parse(JSON.stringify(batch.next));
    }
    return { batches, epochs, cursor };
  }

  it('shuffles each epoch as a seeded permutation, dropping the remainder', () => {
    const sampler = new PromptSampler(size, { batchSize, shuffle: true, seed: 7 });
    expect(sampler.batchesPerEpoch).toBe(3);
    const { batches, epochs } = draw(sampler, { epoch: 0, index: 0 }, 6);
    expect(epochs).toEqual([0, 0, 0, 1, 1, 1]);
    const epoch0 = batches.slice(0, 3).flat();
    const epoch1 = batches.slice(3).flat();
    expect(epoch0).toEqual(Array.from(epochPermutation(size, 7, 0)).slice(0, 9));
    expect(new Set(epoch0).size).toBe(9);
    expect(epoch1).not.toEqual(epoch0);
    expect(Array.from(epochPermutation(size, 7, 1)).sort((a, b) => a - b)).toEqual(
      Array.from({ length: size }, (_, i) => i),
    );
  });

  it('is deterministic in the seed and differs across seeds', () => {
    const a = draw(new PromptSampler(size, { batchSize, shuffle: true, seed: 7 }), { epoch: 0, index: 0 }, 5).batches;
    const b = draw(new PromptSampler(size, { batchSize, shuffle: true, seed: 7 }), { epoch: 0, index: 0 }, 5).batches;
    const c = draw(new PromptSampler(size, { batchSize, shuffle: true, seed: 8 }), { epoch: 0, index: 0 }, 5).batches;
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
  });

  it('resumes at a cursor across an epoch boundary exactly as an uninterrupted run', () => {
    const straight = draw(new PromptSampler(size, { batchSize, shuffle: true, seed: 3 }), { epoch: 0, index: 0 }, 8);
    for (const stopAfter of [2, 3, 4]) {
      const first = draw(
        new PromptSampler(size, { batchSize, shuffle: true, seed: 3 }),
        { epoch: 0, index: 0 },
        stopAfter,
      );
      const resumed = draw(new PromptSampler(size, { batchSize, shuffle: true, seed: 3 }), first.cursor, 8 - stopAfter);
      expect([...first.batches, ...resumed.batches]).toEqual(straight.batches);
      expect([...first.epochs, ...resumed.epochs]).toEqual(straight.epochs);
    }
  });

  it('keeps file order without shuffle', () => {
    const { batches } = draw(
      PromptSampler.fromConfig(
        size,
        loadConfig({
          overrides: ['data.train_batch_size=3', 'data.shuffle=false', 'actor_rollout_ref.actor.ppo_mini_batch_size=3'],
        }).data,
      ),
      { epoch: 0, index: 0 },
      4,
    );
    expect(batches).toEqual([
      [0, 1, 2],
      [3, 4, 5],
      [6, 7, 8],
      [0, 1, 2],
    ]);
  });

  it('rejects a batch larger than the data and a cursor off the batch grid', () => {
    expect(() => new PromptSampler(2, { batchSize: 3, shuffle: true, seed: 1 })).toThrow(
      /data.train_batch_size=3 is larger than the 2 training prompts/,
    );
    expect(() =>
      new PromptSampler(size, { batchSize, shuffle: true, seed: 1 }).batchAt({ epoch: 0, index: 2 }),
    ).toThrow(/not a batch boundary/);
  });

  it('counts training steps as verl', () => {
    const sampler = new PromptSampler(size, { batchSize, shuffle: true, seed: 1 });
    expect(totalTrainingSteps(sampler, { total_epochs: 4, total_training_steps: null })).toBe(12);
    expect(totalTrainingSteps(sampler, { total_epochs: 4, total_training_steps: 5 })).toBe(5);
  });
});
