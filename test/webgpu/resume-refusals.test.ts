// Resume refuses what it cannot honour: a job resumed with another model (SFT, reward model: model.partial_pretrain)
// or another LoRA rank (train.js: actor_rollout_ref.model.lora_rank) stops with one line naming both values, before
// anything is written, instead of silently training the checkpoint's. Tiny runs.
import { describe, it, expect } from 'vitest';
import { cp, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { makeTinyRun, makeTinySftRun } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { parseSftOverrides } from '../../ppo/sft/sft-config.ts';
import { runSftJob } from '../../ppo/jobs/sft-job-node.ts';

describe('resume refuses a changed model or LoRA rank', () => {
  it('sft.js: model.partial_pretrain changed between the run and its resume', async () => {
    const engine = await gpuEngine();
    const { root, launch } = await makeTinySftRun();
    const quiet = () => {};
    const run = (steps: number, extra: string[] = []) =>
      runSftJob(engine, parseSftOverrides(launch('sft', steps, extra)).config, quiet, quiet);
    await run(2);
    const other = join(root, 'other-model');
    await cp(join(root, 'model'), other, { recursive: true });
    const before = await readdir(join(root, 'sft'));
    await expect(run(4, [`model.partial_pretrain=${other}`])).rejects.toThrow(
      `resume: ${join(root, 'sft', 'global_step_2')} was trained with model.partial_pretrain=` +
        `${JSON.stringify(join(root, 'model'))}, this run has model.partial_pretrain=${JSON.stringify(other)} — give ` +
        'model.partial_pretrain as that run did, or a fresh trainer.default_local_dir',
    );
    expect(await readdir(join(root, 'sft'))).toEqual(before);
    // The same model, spelled another way, resumes.
    expect((await run(4, [`model.partial_pretrain=${join(root, 'x', '..', 'model')}`])).steps).toBe(4);
  });

  it('train.js: a LoRA checkpoint of r=4 resumed with lora_rank=8', async () => {
    const { root, overrides } = await makeTinyRun();
    const dir = join(root, 'lora');
    const args = (rank: number, steps: number) => [
      ...overrides,
      `actor_rollout_ref.model.lora_rank=${rank}`,
      'actor_rollout_ref.actor.ppo_mini_batch_size=4',
      'trainer.save_freq=1',
      `trainer.total_training_steps=${steps}`,
      `trainer.default_local_dir=${dir}`,
    ];
    expect((await runCli(args(4, 1))).code).toBe(0);
    const refused = await runCli(args(8, 2));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `resume: the checkpoint ${join(dir, 'global_step_1')} has LoRA adapters with r=4, lora_alpha=16, ` +
          'target_modules \\[[a-z_, ]+\\]; actor_rollout_ref\\.model gives r=8, lora_alpha=16, target_modules ' +
          '\\[[a-z_, ]+\\] — give them as that run did, or trainer\\.resume_mode=disable',
      ),
    );
  });

  it('train.js: actor_rollout_ref.model.path changed between the run and its resume', async () => {
    const { root, overrides } = await makeTinyRun();
    const dir = join(root, 'moved');
    const other = join(root, 'other-model');
    await cp(join(root, 'model'), other, { recursive: true });
    const args = (steps: number, extra: string[] = []) => [
      ...overrides,
      'trainer.save_freq=1',
      `trainer.total_training_steps=${steps}`,
      `trainer.default_local_dir=${dir}`,
      ...extra,
    ];
    expect((await runCli(args(1))).code).toBe(0);
    await expect(runCli(args(2, [`actor_rollout_ref.model.path=${other}`]))).rejects.toThrow(
      `resume: the checkpoint ${join(dir, 'global_step_1')} was trained from actor_rollout_ref.model.path=` +
        `${join(root, 'model')}, this run has ${other} — resume another way: trainer.resume_mode=disable (start ` +
        'fresh), or a different trainer.default_local_dir / trainer.experiment_name',
    );
    expect((await runCli(args(2))).code).toBe(0);
  });
});
