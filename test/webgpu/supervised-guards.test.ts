// The SFT and reward-model jobs guard their numbers and their checkpoints as `node train.js` does: a diverging run
// (optim.lr=1e9) stops at the first non-finite loss or gradient norm naming the last good checkpoint, instead of
// training on with every update skipped and saying "done"; a checkpoint whose optimizer state was deleted is moved
// aside and the job resumes from the newest intact one. Tiny runs on the test's one-layer model.
import { describe, it, expect } from 'vitest';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { makeTinySftRun } from '../support/tiny-run.ts';
import { arithmeticDataset } from '../../ppo/tasks/arithmetic.ts';
import { jobOverrides } from '../../ppo/jobs/supervised-command-node.ts';
import { parseSftOverrides } from '../../ppo/sft/sft-config.ts';
import { runSftJob } from '../../ppo/jobs/sft-job-node.ts';
import { parseRewardOverrides } from '../../ppo/reward-model/reward-config.ts';
import { runRewardJob } from '../../ppo/jobs/reward-model-job-node.ts';

const stepDirs = async (dir: string) => (await readdir(dir)).filter((n) => /^global_step_\d+$/.test(n)).sort();

/** The SFT run's model and root, with preference pairs beside them for the reward-model job. */
async function makeTinyJobs() {
  const sft = await makeTinySftRun();
  const problems = arithmeticDataset({ digits: 1, trainSize: 16, valSize: 0, seed: 5 }).train.map((r) => ({
    question: (r.row.prompt as { content: string }[])[0].content,
    sum: String((r.row.reward_model as { ground_truth: string }).ground_truth),
  }));
  await writeFile(
    join(sft.root, 'pairs.jsonl'),
    problems
      .map((p) =>
        JSON.stringify({
          prompt: [{ role: 'user', content: p.question }],
          chosen: [{ role: 'assistant', content: p.sum }],
          rejected: [{ role: 'assistant', content: `${p.sum} ` }],
        }),
      )
      .join('\n'),
  );
  const rewardLaunch = (dir: string, steps: number, extra: string[] = []) =>
    jobOverrides('reward-model', [
      `data.train_files=${join(sft.root, 'pairs.jsonl')}`,
      `model.partial_pretrain=${join(sft.root, 'model')}`,
      `trainer.default_local_dir=${join(sft.root, dir)}`,
      'data.train_batch_size=4',
      'data.micro_batch_size_per_gpu=2',
      `trainer.total_training_steps=${steps}`,
      'trainer.logger=[file]',
      'optim.lr=1e-3',
      ...extra,
    ]);
  return { ...sft, rewardLaunch };
}

describe('SFT and reward-model jobs: the guards train.js has', () => {
  it('optim.lr=1e9 stops at the first non-finite metric naming the last good checkpoint (SFT, reward model)', async () => {
    const engine = await gpuEngine();
    const { root, launch, rewardLaunch } = await makeTinyJobs();
    const quiet = () => {};
    const extra = ['optim.lr=1e9', 'trainer.save_freq=1', 'trainer.test_freq=100'];
    const jobs = [
      ['sft', () => runSftJob(engine, parseSftOverrides(launch('sft', 6, extra)).config, quiet, quiet)],
      ['rm', () => runRewardJob(engine, parseRewardOverrides(rewardLaunch('rm', 6, extra)).config, quiet, quiet)],
    ] as const;
    for (const [dir, run] of jobs) {
      const error = await run().then(
        () => null,
        (err: Error) => err.message,
      );
      const match =
        /^step (\d+): (train\/\w+) is (NaN|-?Infinity); the step was stopped before the optimizer applied it .*; the last good checkpoint is (\S+)$/.exec(
          error ?? '',
        );
      expect(match, `${dir}: ${error}`).not.toBeNull();
      const failed = Number(match![1]);
      expect(failed).toBeGreaterThan(1);
      expect(match![4]).toBe(join(root, dir, `global_step_${failed - 1}`));
      // Nothing was saved from the poisoned step.
      expect((await stepDirs(join(root, dir))).at(-1)).toBe(`global_step_${failed - 1}`);
    }
  });

  it('a checkpoint whose optimizer.safetensors is gone is moved aside; the job resumes the one before', async () => {
    const engine = await gpuEngine();
    const { root, launch } = await makeTinySftRun();
    const said: string[] = [];
    const run = (steps: number) =>
      runSftJob(
        engine,
        parseSftOverrides(launch('fallback', steps, ['trainer.save_freq=2'])).config,
        () => {},
        (line) => said.push(line),
      );
    await run(4);
    const dir = join(root, 'fallback');
    await rm(join(dir, 'global_step_4', 'optimizer.safetensors'));
    const resumed = await run(4);
    expect(resumed.steps).toBe(4);
    expect(resumed.history.length).toBe(2);
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(
      new RegExp(
        `^resume: ${join(dir, 'global_step_4')} cannot be resumed \\(.*optimizer\\.safetensors.*\\); moved it to ` +
          `${join(dir, 'unreadable_global_step_4_')}\\S+ and resuming from ${join(dir, 'global_step_2')}, the newest ` +
          'intact checkpoint$',
      ),
    );
    expect(await stepDirs(dir)).toEqual(['global_step_2', 'global_step_4']);
  });

  it(
    'input errors name the file or key: an empty training file, every pair dropped; a validation set too small to ' +
      'fill a micro-batch and pairs whose chosen equals rejected are said on stderr',
    async () => {
      const engine = await gpuEngine();
      const { root, launch, rewardLaunch } = await makeTinyJobs();
      const empty = join(root, 'empty.jsonl');
      await writeFile(empty, '');
      const said: string[] = [];
      const warn = (line: string) => said.push(line);
      const sft = (dir: string, extra: string[]) =>
        runSftJob(engine, parseSftOverrides(launch(dir, 1, extra)).config, () => {}, warn);
      await expect(sft('empty', [`data.train_files=${empty}`])).rejects.toThrow(
        `data.train_files=${empty}: no examples to train on — expected at least one row`,
      );
      const rm = (dir: string, extra: string[]) =>
        runRewardJob(engine, parseRewardOverrides(rewardLaunch(dir, 1, extra)).config, () => {}, warn);
      await expect(rm('dropped', ['data.max_length=2'])).rejects.toThrow(
        `data.train_files=${join(root, 'pairs.jsonl')}: no preference pairs (none left within data.max_length=2) to ` +
          'train on — expected at least one row',
      );

      // One validation row; a micro-batch of 4.
      const oneRow = join(root, 'one-val.jsonl');
      await writeFile(oneRow, (await readFile(join(root, 'sft-val.jsonl'), 'utf8')).split('\n')[0]);
      said.length = 0;
      await sft('small-val', [`data.val_files=${oneRow}`]);
      expect(said).toContain(
        `data.val_files=${oneRow}: 1 examples, fewer than data.micro_batch_size_per_gpu=4 — no validation runs`,
      );

      const samePairs = join(root, 'same.jsonl');
      await writeFile(samePairs, JSON.stringify({ prompt: 'q', chosen: 'a', rejected: 'a' }).concat('\n').repeat(4));
      said.length = 0;
      await rm('same', [`data.train_files=${samePairs}`]);
      expect(said).toContain(
        "data.train_files: every pair's chosen equals its rejected (as tokens): the reward model has nothing to " +
          'learn — check data.chosen_key and data.rejected_key',
      );
    },
  );

  it(
    'a bf16 model resumes exactly: checkpoints export bf16 (trainer.save_dtype=auto) and keep the float32 weights ' +
      'the optimizer trained for the resume',
    async () => {
      const engine = await gpuEngine();
      const { root, launch } = await makeTinySftRun();
      const f32 = await loadModel(engine, join(root, 'model'));
      const bf16 = join(root, 'model-bf16');
      await saveModel(engine, bf16, f32.config, f32.params, { tokenizerFrom: join(root, 'model'), dtype: 'bfloat16' });
      const run = (dir: string, steps: number) =>
        runSftJob(
          engine,
          parseSftOverrides(launch(dir, steps, [`model.partial_pretrain=${bf16}`, 'trainer.save_freq=2'])).config,
          () => {},
          () => {},
        );
      const straight = await run('straight', 4);
      await run('resumed', 2);
      const resumed = await run('resumed', 4);
      expect(resumed.history.map((m) => m['train/loss'])).toEqual(
        straight.history.slice(2).map((m) => m['train/loss']),
      );
      for (const step of [2, 4]) {
        const dir = join(root, 'resumed', `global_step_${step}`);
        expect(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')).torch_dtype).toBe('bfloat16');
        expect(JSON.parse(await readFile(join(dir, 'master_weights', 'config.json'), 'utf8')).torch_dtype).toBe(
          'float32',
        );
      }
    },
  );
});
