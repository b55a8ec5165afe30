// verl's GRPO example script (examples/grpo_trainer/run_qwen2-7b.sh) as written, pointed at a tiny model and
// dataset and shrunk by appended overrides, as a user would append them to the script's `$@`: one step runs,
// writes its resolved config.yaml, verl's JSONL metrics and TensorBoard events that an independent reader opens.
import { describe, it, expect } from 'vitest';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { LAUNCH_SCRIPTS, withPaths } from '../support/verl-launch-scripts.ts';
import { runCli } from '../support/run-cli.ts';
import { readEvents } from '../support/tensorboard-reader.ts';

describe('a verl launch script on a tiny model', () => {
  it('runs one step with console, file and tensorboard loggers', async () => {
    const { root, overrides } = await makeTinyRun(6);
    const tiny = Object.fromEntries(overrides.map((o) => [o.slice(0, o.indexOf('=')), o.slice(o.indexOf('=') + 1)]));
    const runDir = join(root, 'grpo-script');
    const grpo = LAUNCH_SCRIPTS.find((s) => s.source === 'verl examples/grpo_trainer/run_qwen2-7b.sh')!;
    const argv = [
      ...withPaths(grpo.argv, { model: tiny['actor_rollout_ref.model.path'], data: tiny['data.train_files'], runDir }),
      'data.train_batch_size=4', 'data.max_prompt_length=16', 'data.max_response_length=3', 'data.val_max_samples=2',
      'actor_rollout_ref.actor.ppo_mini_batch_size=2', 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2',
      'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2', 'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2',
      'actor_rollout_ref.rollout.n=2', 'trainer.total_training_steps=1', 'trainer.n_gpus_per_node=1', `trainer.default_local_dir=${runDir}`,
      'trainer.logger=["console","file","tensorboard","wandb"]',
    ];
    const { code, stdout, stderr } = await runCli(argv);
    expect(code, stderr).toBe(0);
    expect(stderr).toContain('ignored 6 key(s) with no meaning on one WebGPU adapter: actor_rollout_ref.model.use_remove_padding');
    expect(stderr).toContain('trainer.logger: skipped wandb');

    const config = parseYaml(await readFile(join(runDir, 'config.yaml'), 'utf8'));
    expect(config.algorithm.adv_estimator).toBe('grpo');
    expect(config.actor_rollout_ref.actor.use_kl_loss).toBe(true);
    const lines = await runMetrics(runDir);
    const step = lines.find((l) => l.data['critic/score/mean'] !== undefined)!;
    expect(step.step).toBe(1);

    const [eventFile] = await readdir(join(runDir, 'tensorboard'));
    const events = readEvents(new Uint8Array(await readFile(join(runDir, 'tensorboard', eventFile))));
    expect(events[0].fileVersion).toBe('brain.Event:2');
    const stepEvent = events.find((e) => e.step === 1 && e.summary.value.some((v: { tag: string }) => v.tag === 'critic/score/mean'));
    const score = stepEvent.summary.value.find((v: { tag: string }) => v.tag === 'critic/score/mean').simpleValue;
    expect(score).toBeCloseTo(step.data['critic/score/mean'], 6);
  });
});
