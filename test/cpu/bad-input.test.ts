// Bad input found where it loads, named in one line, with nothing of a previous run lost: the checks that need
// no device (data files, tokenizer directories, rewards against the data, model against the run, the run
// directory across runs, the one-line error format). The end-to-end cases through `node train.js` are in
// test/webgpu/bad-input-cli.test.ts.
import { describe, it, expect } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseJsonl } from '../../ppo/data/dataset.ts';
import { loadRlDataset } from '../../ppo/data/dataset-node.ts';
import { loadTokenizer } from '../../models/tokenizer-node.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { arithmeticTokenizer, arithmeticTokenizerFiles } from '../../ppo/tasks/arithmetic.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { loadConfig } from '../../ppo/config.ts';
import type { RlExample } from '../../ppo/data/dataset.ts';
import { checkModelFitsRun, checkRewardsCanScore } from '../../ppo/jobs/input-checks.ts';
import {
  removeStaleSaves,
  setAsidePreviousRun,
  trimMetricsAfter,
  prepareRunDirectory,
} from '../../ppo/run-directory/run-directory-node.ts';
import { formatRunError, runMain, withFileContext } from '../../ppo/config/user-error.ts';
import { makeTempDir } from '../support/temp-dir.ts';

const tmp = () => makeTempDir('bad-input-');
const config = (overrides: string[] = []) => loadConfig({ overrides });

describe('data files', () => {
  const row = {
    data_source: 'arithmetic',
    prompt: [{ role: 'user', content: '1+2=' }],
    reward_model: { ground_truth: '3' },
  };

  it('a UTF-8 byte-order mark before the first row is not part of it', () => {
    expect(parseJsonl(`\uFEFF${JSON.stringify(row)}\n`, 'f.jsonl').map((r) => r.row)).toEqual([row]);
  });

  it('an empty JSONL names the file', async () => {
    const dir = await tmp();
    await writeFile(join(dir, 'empty.jsonl'), '\n');
    const template = new ChatTemplate(
      { chat_template: '{{ messages[0].content }}' },
      { bos: null, eos: null, pad: null, unk: null },
    );
    const tokenizer = { encode: async (text: string) => arithmeticTokenizer.encode(text) };
    await expect(loadRlDataset(join(dir, 'empty.jsonl'), { ...config().data, tokenizer, template })).rejects.toThrow(
      /^data file \S+empty\.jsonl: no rows/,
    );
  });
});

describe('tokenizer directories', () => {
  it('a missing directory is named as missing, not as lacking tokenizer.json', async () => {
    await expect(loadTokenizer('/nonexistent/model')).rejects.toThrow('/nonexistent/model: no such directory');
  });

  it('a truncated tokenizer.json names the file', async () => {
    const dir = await tmp();
    await writeFile(
      join(dir, 'tokenizer.json'),
      JSON.stringify(arithmeticTokenizerFiles().tokenizerJson).slice(0, 200),
    );
    await expect(loadTokenizer(dir)).rejects.toThrow(
      new RegExp(`^${join(dir, 'tokenizer.json')}: cannot load it as a tokenizer \\(.*EOF`),
    );
  });
});

describe('inputs that disagree', () => {
  const example = (dataSource: string, groundTruth: unknown): RlExample => ({
    index: 0,
    where: 'train.jsonl line 3',
    messages: [],
    dataSource,
    groundTruth,
    extraInfo: {},
    promptText: '',
    promptIds: [],
  });

  it('an unknown data_source or a ground truth its rule cannot read stops at load, naming the row', () => {
    expect(() => checkRewardsCanScore(config(), [example('arithmetic', '3'), example('my_task', '3')])).toThrow(
      /^train\.jsonl line 3: no rule reward for data_source "my_task"/,
    );
    expect(() => checkRewardsCanScore(config(), [example('openai/gsm8k', null)])).toThrow(
      /^train\.jsonl line 3: reward for data_source "openai\/gsm8k": reward_model\.ground_truth must be a string/,
    );
  });

  it('a custom reward function or a reward model takes any data_source', () => {
    expect(() =>
      checkRewardsCanScore(config(['custom_reward_function.path=r.ts']), [example('my_task', null)]),
    ).not.toThrow();
  });

  it('prompt + response beyond max_position_embeddings, and tokenizer ids beyond the vocabulary', () => {
    const model = {
      ...tinyQwen3Config(64, { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 }),
      maxPositionEmbeddings: 20,
    };
    expect(() =>
      checkModelFitsRun(config(['data.max_prompt_length=16', 'data.max_response_length=5']), model, { vocabSize: 64 }),
    ).toThrow(
      "data.max_prompt_length + data.max_response_length = 16 + 5 = 21 exceeds the model's max_position_embeddings 20",
    );
    expect(() =>
      checkModelFitsRun(config(['data.max_prompt_length=15', 'data.max_response_length=5']), model, { vocabSize: 65 }),
    ).toThrow("the tokenizer has 65 tokens but the model's vocab_size is 64");
    expect(() =>
      checkModelFitsRun(config(['data.max_prompt_length=15', 'data.max_response_length=5']), model, { vocabSize: 64 }),
    ).not.toThrow();
  });
});

describe('run directory', () => {
  it("a fresh start moves the previous run's metrics and checkpoints aside, never deletes them", async () => {
    const dir = await tmp();
    await writeFile(join(dir, 'metrics.jsonl'), '{"step":1,"data":{}}\n');
    await mkdir(join(dir, 'global_step_1'));
    await writeFile(join(dir, 'notes.txt'), 'mine');
    const archive = await setAsidePreviousRun(dir, new Date('2026-01-02T03:04:05.678Z'));
    expect(archive).toBe(join(dir, 'previous_run_2026-01-02T03-04-05-678Z'));
    expect((await readdir(dir)).sort()).toEqual(['notes.txt', 'previous_run_2026-01-02T03-04-05-678Z']);
    expect((await readdir(archive!)).sort()).toEqual(['global_step_1', 'metrics.jsonl']);
    expect(await setAsidePreviousRun(dir)).toBeNull();
  });

  it('resume drops metrics lines past the resumed step and a torn last line', async () => {
    const file = join(await tmp(), 'metrics.jsonl');
    const lines = [1, 2, 3].map((step) => JSON.stringify({ step, data: { 'training/global_step': step } }));
    await writeFile(file, `${[...lines, '{"step": 4, "da'].join('\n')}\n`);
    expect(await trimMetricsAfter(file, 2)).toBe(2);
    expect(await readFile(file, 'utf8')).toBe(`${lines.slice(0, 2).join('\n')}\n`);
    expect(await trimMetricsAfter(file, 2)).toBe(0);
  });

  it('staging folders of saves whose process is gone are removed; a live one is kept', async () => {
    const dir = await tmp();
    const dead = await new Promise<number>((done) => {
      const child = spawn(process.execPath, ['-e', '']);
      child.on('exit', () => done(child.pid!));
    });
    await mkdir(join(dir, `.global_step_4.saving-${dead}`));
    await mkdir(join(dir, `.global_step_5.saving-${process.pid}`));
    expect(await removeStaleSaves(dir)).toEqual([`.global_step_4.saving-${dead}`]);
    expect(await readdir(dir)).toEqual([`.global_step_5.saving-${process.pid}`]);
  });

  it('a run directory that cannot be written is named before any work', async () => {
    const file = join(await tmp(), 'a-file');
    await writeFile(file, '');
    await expect(prepareRunDirectory(join(file, 'run'))).rejects.toThrow(
      `trainer.default_local_dir=${join(file, 'run')} is not a writable directory: a part of the path is not a ` +
        `directory (ENOTDIR)`,
    );
  });
});

describe('one-line errors', () => {
  it('file-system errors get what was being done and the path; folded to one line', async () => {
    const enospc = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    await expect(
      withFileContext('saving checkpoint /runs/a/global_step_3', () => Promise.reject(enospc)),
    ).rejects.toThrow('saving checkpoint /runs/a/global_step_3: the disk is full (ENOSPC)');
    expect(formatRunError(new Error('two\n  lines'))).toBe('error: two; lines');
    const enoent = Object.assign(new Error('ENOENT: no such file or directory, open'), {
      code: 'ENOENT',
      path: '/x/y',
    });
    expect(formatRunError(enoent)).toBe('error: ENOENT: no such file or directory, open (/x/y)');
  });

  it('runMain: one line and status 1, the stack only with TRAIN_DEBUG=1', async () => {
    const written: string[] = [];
    expect(
      await runMain(
        () => Promise.reject(new Error('data file x.jsonl line 2: not valid JSON')),
        (t) => written.push(t),
      ),
    ).toBe(1);
    expect(written).toEqual(['error: data file x.jsonl line 2: not valid JSON']);
    process.env.TRAIN_DEBUG = '1';
    try {
      written.length = 0;
      await runMain(
        () => Promise.reject(new Error('boom')),
        (t) => written.push(t),
      );
      expect(written[1]).toMatch(/^Error: boom\n\s+at /);
    } finally {
      delete process.env.TRAIN_DEBUG;
    }
  });
});
