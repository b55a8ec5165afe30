// tools/jsonl-to-parquet.js: verl-schema Parquet (nested lists and structs as pyarrow writes them) that our own
// reader (ppo/data) reads back as the JSONL rows; --gsm8k as verl's examples/data_preprocess/gsm8k.py; a bad line
// named in one line with nothing written.
import { describe, it, expect, beforeAll, afterAll, vi, afterEach } from 'vitest';
import { mkdtemp, writeFile, readFile, rm, readdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { parquetMetadata } from 'hyparquet';
import { runJsonlToParquet } from '../../tools/parquet/jsonl-to-parquet.ts';
import { readRlRecords } from '../../ppo/data/dataset-node.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'jsonl-to-parquet-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

function run(argv: string[]): { code: number; stdout: string; stderr: string } {
  let stdout = '';
  let stderr = '';
  vi.spyOn(console, 'log').mockImplementation((...p) => {
    stdout += `${p.join(' ')}\n`;
  });
  vi.spyOn(console, 'error').mockImplementation((...p) => {
    stderr += `${p.join(' ')}\n`;
  });
  const code = runJsonlToParquet(argv);
  vi.restoreAllMocks();
  return { code, stdout, stderr };
}

async function convert(name: string, rows: string[], options: string[] = []) {
  const input = join(dir, `${name}.jsonl`);
  const output = join(dir, `${name}.parquet`);
  await writeFile(input, `${rows.join('\n')}\n`);
  return { input, output, ...run([input, output, ...options]) };
}

const ROWS = [
  {
    data_source: 'openai/gsm8k',
    prompt: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: '2+2?' },
    ],
    ability: 'math',
    reward_model: { style: 'rule', ground_truth: '4' },
    extra_info: { split: 'train', index: 0, weight: 0.5, checked: true, note: null, tags: ['a', 'b'] },
  },
  {
    data_source: 'nq',
    prompt: [{ role: 'user', content: 'Who?' }],
    ability: 'fact-reasoning',
    reward_model: { style: 'rule', ground_truth: { target: ['Ada', 'Ada Lovelace'] } },
    extra_info: { split: 'train', index: 1, weight: 2, checked: false, note: 'x', tags: [] },
  },
];

describe('jsonl-to-parquet', () => {
  it("writes verl's nested schema, and ppo/data reads the rows back as written", async () => {
    const first = { ...ROWS[0], reward_model: { style: 'rule', ground_truth: { target: ['4'] } } };
    const { code, stderr, output } = await convert(
      'rows',
      [first, ROWS[1]].map((r) => JSON.stringify(r)),
    );
    expect(code, stderr).toBe(0);
    const back = (await readRlRecords(output)).map((r) => r.row);
    expect(back).toEqual([first, ROWS[1]]);
    const bytes = await readFile(output);
    const schema = parquetMetadata(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)).schema;
    const element = (name: string) => schema.find((s) => s.name === name)!;
    expect(element('prompt')).toMatchObject({ converted_type: 'LIST', num_children: 1 });
    expect(schema.map((s) => s.name).slice(0, 8)).toEqual([
      'root',
      'data_source',
      'prompt',
      'list',
      'element',
      'role',
      'content',
      'ability',
    ]);
    expect(element('index').type).toBe('INT64');
    expect(element('weight').type).toBe('DOUBLE');
  });

  it('a field missing from a row is null there, as pyarrow fills a struct', async () => {
    const { code, output } = await convert('missing', [
      JSON.stringify({ a: { x: 1, y: 's' } }),
      JSON.stringify({ a: { x: 2 } }),
    ]);
    expect(code).toBe(0);
    expect((await readRlRecords(output)).map((r) => r.row)).toEqual([
      { a: { x: 1, y: 's' } },
      { a: { x: 2, y: null } },
    ]);
  });

  it("--gsm8k writes verl's preprocessed GSM8K rows", async () => {
    const raw = [
      {
        question: 'Natalia sold 48 clips in April and half as many in May. How many altogether?',
        answer: 'In May: 48/2 = <<48/2=24>>24.\n48+24 = <<48+24=72>>72.\n#### 1,072',
      },
      { question: 'Below zero?', answer: 'It fell by 3.\n#### -3' },
    ];
    const { code, stderr, output } = await convert(
      'gsm8k',
      raw.map((r) => JSON.stringify(r)),
      ['--gsm8k', '--split=test'],
    );
    expect(code, stderr).toBe(0);
    const back = (await readRlRecords(output)).map((r) => r.row);
    expect(back[0]).toEqual({
      data_source: 'openai/gsm8k',
      prompt: [
        {
          role: 'user',
          content: `${raw[0].question} Let's think step by step and output the final answer after "####".`,
        },
      ],
      ability: 'math',
      reward_model: { style: 'rule', ground_truth: '1072' },
      extra_info: { split: 'test', index: 0, answer: raw[0].answer, question: raw[0].question },
    });
    expect(back[1].reward_model).toEqual({ style: 'rule', ground_truth: '-3' });
    expect((back[1].extra_info as Record<string, unknown>).index).toBe(1);
  });

  it('a bad line is named in one line, exit 1, and nothing is written (an earlier output stays whole)', async () => {
    const cases: [string, string[], string[], RegExp][] = [
      ['json', [JSON.stringify(ROWS[0]), '{"data_source": "x",'], [], /bad-json\.jsonl line 2: not valid JSON/],
      [
        'type',
        [JSON.stringify({ a: 1 }), JSON.stringify({ a: 'one' })],
        [],
        /bad-type\.jsonl line 2: a is string here but int in earlier rows/,
      ],
      [
        'gsm8k',
        [JSON.stringify({ question: 'q', answer: 'no final line' })],
        ['--gsm8k'],
        /bad-gsm8k\.jsonl line 1: answer has no final "#### N" line/,
      ],
    ];
    for (const [name, lines, options, message] of cases) {
      const output = join(dir, `bad-${name}.parquet`);
      await writeFile(output, 'previous');
      const result = await convert(`bad-${name}`, lines, options);
      expect(result.code).toBe(1);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(message);
      expect(await readFile(output, 'utf8')).toBe('previous');
    }
    expect((await readdir(dir)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    const missing = run([join(dir, 'nope.jsonl'), join(dir, 'nope.parquet')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('nope.jsonl: cannot read it (ENOENT)');
    expect(existsSync(join(dir, 'nope.parquet'))).toBe(false);
  });
});
