// The browser demo's shipped starting checkpoint (demo/public/warm-start/, written by tools/demo-checkpoint.js) is
// still what the default job's warm start makes: a complete HF directory the Node loaders open, the arithmetic
// task's tokenizer files, and a record of the task's warm-start stages. A change to the task, its vocabulary or its
// warm start fails here until the checkpoint is made again.
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openHfCheckpoint } from '../../models/checkpoint-io-node.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { loadConfig } from '../../ppo/config.ts';
import { builtinDataset, builtinTokenizer } from '../../ppo/jobs/builtin-run.ts';
import { BUILTIN_TASKS } from '../../ppo/tasks/builtin-tasks.ts';
import { DEFAULT_JOB, WARM_START_RECORD_FILE, type WarmStartRecord } from '../../ppo/tasks/default-job.ts';
import { SHIPPED_CHECKPOINT_PATH } from '../../demo/src/shipped-checkpoint.ts';

const DIR = resolve(import.meta.dirname, '../..', SHIPPED_CHECKPOINT_PATH);
const REMAKE = 'make it again with `node tools/demo-checkpoint.js`';

describe("the demo's shipped checkpoint", () => {
  it("is the built-in model in BF16, a few hundred KB, and its tokenizer files are the arithmetic task's", async () => {
    const checkpoint = await openHfCheckpoint(DIR);
    try {
      const task = BUILTIN_TASKS.arithmetic;
      const { tokenizer, files } = builtinTokenizer(task);
      expect(checkpoint.config, REMAKE).toEqual(tinyQwen3Config(tokenizer.vocabSize));
      for (const name of checkpoint.tensors.names()) expect(checkpoint.tensors.info(name)!.dtype).toBe('BF16');
      for (const [name, text] of Object.entries(files))
        expect(await readFile(join(DIR, name), 'utf8'), `${name}: ${REMAKE}`).toBe(text);
    } finally {
      await checkpoint.tensors.close();
    }
    const bytes = (await readFile(join(DIR, 'model.safetensors'))).length;
    expect(bytes).toBeLessThan(1024 * 1024);
  });

  it("records the default job's warm-start stages, seeds and a loss per step", async () => {
    const record = JSON.parse(await readFile(join(DIR, WARM_START_RECORD_FILE), 'utf8')) as WarmStartRecord;
    const config = loadConfig({ layers: [DEFAULT_JOB] });
    const task = BUILTIN_TASKS.arithmetic;
    const { tokenizer, template } = builtinTokenizer(task);
    const { train } = await builtinDataset(config, task, tokenizer, template);
    // Stage names and lengths do not depend on the seed.
    const stages = await task.warmStart(train, config.trainer.seed, null, config.retriever.topk);
    expect(record.stages, REMAKE).toEqual(stages.map((s) => ({ name: s.name, steps: s.steps })));
    expect([record.trainerSeed, record.dataSeed]).toEqual([config.trainer.seed, config.data.seed]);
    expect(record.command).toBe('node tools/demo-checkpoint.js');
    expect(record.loss.length).toBe(stages.reduce((n, s) => n + s.steps, 0));
    // Pretraining taught the sums: its last losses are far below the first.
    expect(record.loss[stages[0].steps - 1]).toBeLessThan(record.loss[0] / 10);
  });
});
