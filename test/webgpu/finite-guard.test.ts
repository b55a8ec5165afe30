// A diverging run stops at the first non-finite loss, gradient norm or reward, naming the tensor and the step,
// before the optimizer applies it; no checkpoint is written from poisoned weights, so the last good one stays
// the latest and auto-resume continues from it. Weights that are non-finite in their file never get that far: the
// load refuses them.
import { describe, it, expect, vi } from 'vitest';
import { open, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun } from '../support/tiny-run.ts';
import { gpuEngine } from '../support/gpu-engine.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { saveModel } from '../../models/model-files-node.ts';

async function stepDirs(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => n.startsWith('global_step_')).sort();
}

/** Overwrites the last 8 bytes of the weights (the last tensor's last values) with NaN, as f32 and as bf16. */
async function poisonWeights(modelDir: string): Promise<void> {
  const file = join(modelDir, 'model.safetensors');
  const { size } = await stat(file);
  const handle = await open(file, 'r+');
  await handle.write(Buffer.from([0xc0, 0x7f, 0xc0, 0x7f, 0xc0, 0x7f, 0xc0, 0x7f]), 0, 8, size - 8);
  await handle.close();
}

describe('non-finite guard', () => {
  it('a model whose weights hold Inf is never saved: the error names the tensor', async () => {
    const engine = await gpuEngine();
    const config = tinyQwen3Config(16, { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 });
    const values = initialParameters(config, 1);
    values.get('model.norm.weight')![5] = Infinity;
    const params = createParameterArena(engine, config, 'actor');
    uploadArenaTensors(engine, params, values);
    const dir = join((await makeTinyRun()).root, 'inf-model');
    await expect(saveModel(engine, dir, config, params)).rejects.toThrow(
      `saving ${dir}: tensor 'model.norm.weight' holds Infinity at index 5`,
    );
    await expect(stat(dir)).rejects.toThrow(/ENOENT/);
  });

  it('NaN weights in the model file never reach a step: refused at load, naming the file and tensor, before the run ' +
    'directory exists', async () => {
    const { root, overrides } = await makeTinyRun();
    await poisonWeights(join(root, 'model'));
    const dir = join(root, 'run');
    const errors: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((line: string) => void errors.push(line));
    try {
      expect(
        await main([
          ...overrides,
          `trainer.default_local_dir=${dir}`,
          'trainer.total_training_steps=2',
          'trainer.save_freq=1',
        ]),
      ).toBe(1);
    } finally {
      spy.mockRestore();
    }
    expect(errors).toEqual([
      expect.stringMatching(
        /^error: \S+model\.safetensors: tensor '\S+' holds NaN at index \d+.*; refusing to load the actor with non-finite weights/,
      ),
    ]);
    await expect(stat(dir)).rejects.toThrow(/ENOENT/);
  }, 300_000);

  it('lr=1e9: the run stops naming the step, leaves no checkpoint or metrics line of it, and resumes from the last ' +
    'good one', async () => {
    const { root, overrides } = await makeTinyRun();
    const dir = join(root, 'run');
    const common = [...overrides, `trainer.default_local_dir=${dir}`, 'trainer.save_freq=1'];
    expect(await main([...common, 'trainer.total_training_steps=1'])).toBe(0);
    const error = await main([
      ...common,
      'trainer.total_training_steps=6',
      'actor_rollout_ref.actor.optim.lr=1e9',
      'critic.optim.lr=1e9',
    ]).then(
      () => null,
      (err: Error) => err,
    );
    expect(error?.message).toMatch(/^step \d+: \S+ is (NaN|-?Infinity)/);
    const failed = Number(/^step (\d+)/.exec(error!.message)![1]);
    expect(await stepDirs(dir)).not.toContain(`global_step_${failed}`);
    const metrics = (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(metrics.every((m) => m.step < failed)).toBe(true);
    const latest = Math.max(...(await stepDirs(dir)).map((n) => Number(n.slice('global_step_'.length))));
    expect(latest).toBe(failed - 1);
    expect(error!.message).toMatch(new RegExp(`; the last good checkpoint is ${join(dir, `global_step_${latest}`)}$`));
    expect(await main([...common, `trainer.total_training_steps=${failed}`])).toBe(0);
    expect(await stepDirs(dir)).toContain(`global_step_${failed}`);
  }, 300_000);
});
