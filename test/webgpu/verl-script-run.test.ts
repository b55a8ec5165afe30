// verl b178a3cd's GRPO example script (examples/grpo_trainer/run_qwen2-7b.sh), its argv from bash running verl's own
// file (test/support/data/verl-b178a3cd), pointed at a tiny model and dataset and shrunk by appended overrides, as a
// user would append them to the script's `$@`: one step runs, writes its resolved config.yaml, verl's JSONL metrics and
// TensorBoard events that an independent reader opens. DAPO's end-to-end script (tests/special_e2e/run_dapo.sh) runs
// the same way, with its dynamic sampling and overlong buffer on, and so does verl 1dda039b's GRPO script.
import { describe, it, expect } from 'vitest';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { HAS_BASH, scriptArgv, VERL_B178A3CD_ROOT, VERL_HEAD_ROOT, withPaths } from '../support/verl-script-argv.ts';
import { readEvents } from '../support/tensorboard-reader.ts';

describe.skipIf(!HAS_BASH)('a verl launch script on a tiny model', () => {
  it('runs one step with console, file and tensorboard loggers', async () => {
    const { root, overrides } = await makeTinyRun(6);
    const tiny = Object.fromEntries(overrides.map((o) => [o.slice(0, o.indexOf('=')), o.slice(o.indexOf('=') + 1)]));
    const runDir = join(root, 'grpo-script');
    const grpo = scriptArgv(VERL_B178A3CD_ROOT, 'examples/grpo_trainer/run_qwen2-7b.sh');
    const argv = [
      ...withPaths(grpo, { model: tiny['actor_rollout_ref.model.path'], data: tiny['data.train_files'], runDir }),
      'data.train_batch_size=4',
      'data.max_prompt_length=16',
      'data.max_response_length=3',
      'data.val_max_samples=2',
      'actor_rollout_ref.actor.ppo_mini_batch_size=2',
      'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2',
      'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2',
      'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2',
      'actor_rollout_ref.rollout.n=2',
      'trainer.total_training_steps=1',
      'trainer.n_gpus_per_node=1',
      `trainer.default_local_dir=${runDir}`,
      'trainer.logger=["console","file","tensorboard","wandb"]',
    ];
    const { code, stderr } = await runCli(argv);
    expect(code, stderr).toBe(0);
    // rollout.name=vllm is a key now (rollout servers); without server_urls it generates in-process, and one note says
    // so.
    expect(stderr).toContain(
      'ignored 4 key(s) with no meaning on one WebGPU adapter: actor_rollout_ref.model.use_remove_padding',
    );
    expect(stderr.split('\n').filter((line) => line.includes('actor_rollout_ref.rollout.name'))).toEqual([
      'actor_rollout_ref.rollout.name=vllm without rollout.server_urls: responses are generated in-process, on this ' +
        "engine's decoder (docs/rollout-servers.md)",
    ]);
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
    const stepEvent = events.find(
      (e) => e.step === 1 && e.summary.value.some((v: { tag: string }) => v.tag === 'critic/score/mean'),
    );
    const score = stepEvent.summary.value.find((v: { tag: string }) => v.tag === 'critic/score/mean').simpleValue;
    expect(score).toBeCloseTo(step.data['critic/score/mean'], 6);
  });

  it("runs verl 1dda039b's GRPO script one step, recomputing old log-probs as verl's default now does", async () => {
    const { root, overrides } = await makeTinyRun(6);
    const tiny = Object.fromEntries(overrides.map((o) => [o.slice(0, o.indexOf('=')), o.slice(o.indexOf('=') + 1)]));
    const runDir = join(root, 'grpo-head-script');
    const argv = scriptArgv(VERL_HEAD_ROOT, 'examples/grpo_trainer/run_qwen3_8b_fsdp.sh');
    const { code, stderr } = await runCli([
      ...withPaths(argv, { model: tiny['actor_rollout_ref.model.path'], data: tiny['data.train_files'], runDir }),
      'data.train_batch_size=4',
      'data.max_prompt_length=16',
      'data.max_response_length=3',
      'actor_rollout_ref.actor.ppo_mini_batch_size=2',
      'actor_rollout_ref.actor.ppo_max_token_len_per_gpu=64',
      'actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=64',
      'actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=64',
      'actor_rollout_ref.rollout.n=2',
      'trainer.total_training_steps=1',
      'trainer.val_before_train=false',
      'trainer.test_freq=-1',
      'trainer.n_gpus_per_node=1',
      `trainer.default_local_dir=${runDir}`,
      'trainer.logger=[file]',
    ]);
    expect(code, stderr).toBe(0);
    const [step] = (await runMetrics(runDir)).filter((l) => l.data['critic/score/mean'] !== undefined);
    expect(step.step).toBe(1);
    expect(step.data['timing_s/old_log_prob']).toBeGreaterThanOrEqual(0);
    expect(Math.abs(step.data['rollout_corr/kl'])).toBeLessThan(1e-3);
  }, 300_000);

  it("runs DAPO's script: dynamic sampling draws generation batches until the kept groups fill the batch", async () => {
    const { root, overrides } = await makeTinyRun(12);
    const tiny = Object.fromEntries(overrides.map((o) => [o.slice(0, o.indexOf('=')), o.slice(o.indexOf('=') + 1)]));
    const runDir = join(root, 'dapo-script');
    // Prompts whose ground truth is a multiple of 3 score 1 then 0 within their group of 2 (kept), the others a
    // constant 1 (dropped while the overlong buffer, which starts past every response here, leaves them uniform).
    const reward = join(root, 'some-uniform.mjs');
    await writeFile(
      reward,
      'let calls = 0;\nexport function compute_score(source, text, truth) { const parity = calls++ % 2; return ' +
        'Number(truth) % 3 === 0 ? 1 - parity : 1; }\n',
    );
    const dapo = scriptArgv(VERL_B178A3CD_ROOT, 'tests/special_e2e/run_dapo.sh');
    const argv = [
      ...withPaths(dapo, { model: tiny['actor_rollout_ref.model.path'], data: tiny['data.train_files'], runDir }),
      `custom_reward_function.path=${reward}`,
      'reward_model.overlong_buffer.len=1',
      'reward_model.reward_kwargs.max_resp_len=8',
      'data.train_batch_size=2',
      'data.gen_batch_size=4',
      'data.max_prompt_length=16',
      'data.max_response_length=3',
      'actor_rollout_ref.actor.ppo_mini_batch_size=2',
      'actor_rollout_ref.rollout.n=2',
      'trainer.n_gpus_per_node=1',
      `trainer.default_local_dir=${runDir}`,
      'trainer.logger=["console","file"]',
    ];
    const { code, stderr } = await runCli(argv);
    expect(code, stderr).toBe(0);
    const config = parseYaml(await readFile(join(runDir, 'config.yaml'), 'utf8'));
    expect(config.algorithm.filter_groups).toEqual({ enable: true, metric: 'seq_reward', max_num_gen_batches: 10 });
    expect(config.reward_model.reward_manager).toBe('dapo');
    const step = (await runMetrics(runDir)).find((l) => l.data['critic/score/mean'] !== undefined)!;
    expect(step.step).toBe(1);
    for (const [key, value] of Object.entries(step.data))
      expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
    expect(step.data['train/num_gen_batches']).toBeGreaterThanOrEqual(1);
    // Only kept groups are trained on: each has one 1 and one 0.
    expect(step.data['critic/score/mean']).toBe(0.5);
  });
});
