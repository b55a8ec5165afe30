// The command line's layers and Hydra conventions, through `node train.js --cfg job` (no device is created):
// verl's defaults for a user's run, the built-in job's layer otherwise, Hydra's override grammar, verl keys
// accepted or refused, and the one-adapter check.
import { describe, it, expect, vi, afterEach } from 'vitest';
import { runCli } from '../support/run-cli.ts';
import { parse as parseYaml } from 'yaml';
import { loadConfig, composeConfig, formatHelp, type ConfigError } from '../../ppo/config.ts';
import { DEFAULT_JOB } from '../../ppo/tasks/default-job.ts';

/** The composed config `--cfg job` prints, as an object. */
async function composed(argv: string[], env: Record<string, string> = {}): Promise<Record<string, any>> {
  const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...argv], env);
  expect(code, stderr).toBe(0);
  return parseYaml(stdout);
}

afterEach(() => vi.restoreAllMocks());

// A verl user's GRPO command on GSM8K with a Hugging Face model id (verl's quickstart shape).
const GSM8K = [
  'actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct',
  'data.train_files=gsm8k/train.parquet',
  'data.val_files=gsm8k/test.parquet',
  'algorithm.adv_estimator=grpo',
  'actor_rollout_ref.rollout.n=4',
  'data.train_batch_size=32',
  'actor_rollout_ref.actor.ppo_mini_batch_size=8',
];

describe('layers', () => {
  it("a run with a model or data starts from verl's defaults", async () => {
    const c = await composed(GSM8K);
    expect(c.data.max_prompt_length).toBe(512);
    expect(c.data.max_response_length).toBe(512);
    expect(c.trainer.total_training_steps).toBeNull();
    expect(c.trainer.total_epochs).toBe(30);
    expect(c.actor_rollout_ref.actor.optim).toMatchObject({
      lr: 1e-6,
      lr_warmup_steps: -1,
      weight_decay: 0.01,
      lr_scheduler_type: 'constant',
    });
    expect(c.actor_rollout_ref.actor.clip_ratio_low).toBe(0.2);
    expect(c.actor_rollout_ref.actor.clip_ratio_high).toBe(0.2);
    expect(c.critic.optim.lr).toBe(1e-5);
    expect(c.trainer.default_local_dir).toBe('checkpoints/verl_examples/gsm8k');
    expect(await composed(['data.train_files=gsm8k/train.parquet', 'actor_rollout_ref.model.path=m'])).toMatchObject({
      data: { max_response_length: 512 },
    });
  });

  it("no model and no data: the built-in job's layer, which the command line still varies", async () => {
    const builtin = await composed([]);
    expect(builtin.data.max_prompt_length).toBe(16);
    expect(builtin.trainer.total_training_steps).toBe(40);
    expect(builtin.trainer.default_local_dir).toBe('checkpoints/webgpu_rlhf/arithmetic_tiny');
    const seeded = await composed(['trainer.seed=2']);
    expect(seeded).toEqual({ ...builtin, trainer: { ...builtin.trainer, seed: 2 } });
  });

  it('--help names the layer each value comes from', () => {
    const help = formatHelp(DEFAULT_JOB);
    expect(help).toContain(
      'examples/arithmetic_tiny.yaml when neither actor_rollout_ref.model.path nor data.train_files is set',
    );
    expect(help).toMatch(/ {2}max_prompt_length = 512 {3}\[built-in job: 16\]/);
    expect(help).toMatch(/ {2}max_obs_length = 512\n/);
  });

  it('--help shows the built-in job only where it differs from the default', () => {
    const help = formatHelp(DEFAULT_JOB);
    expect(help).toMatch(/ {2}total_training_steps = null {3}\[built-in job: 40\]/);
    // The built-in job sets algorithm.adv_estimator=gae and ppo_epochs=1, verl's defaults too.
    expect(help).toMatch(/ {2}adv_estimator = gae\n/);
    for (const [, value, job] of help.matchAll(/ = (.*) {3}\[built-in job: (.*)\]/g)) expect(job).not.toBe(value);
  });

  it('--help SECTION lists only the keys under that group', async () => {
    const { code, stdout } = await runCli(['--help', 'algorithm']);
    expect(code).toBe(0);
    const groups = stdout.split('\n').filter((line) => /^\S.*:$/.test(line));
    expect(groups[0]).toBe('algorithm:');
    for (const group of groups) expect(group).toMatch(/^algorithm[.:]/);
    expect(stdout).toContain('  adv_estimator = gae');
    expect(stdout).not.toContain('ppo_mini_batch_size');
    const nested = await runCli(['--help=actor_rollout_ref.actor.optim']);
    expect(nested.stdout).toContain('actor_rollout_ref.actor.optim:');
    expect(nested.stdout).not.toContain('clip_ratio');
  });

  it('--help with an unknown section is one line naming the sections, exit 2', async () => {
    const { code, stdout, stderr } = await runCli(['--help', 'algorithms']);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain('--help algorithms: no such group of keys; expected one of data, actor_rollout_ref,');
  });
});

describe('Hydra conventions', () => {
  const overrides = (...o: string[]) => loadConfig({ overrides: o, env: { DATA: '/data', EMPTY: '' } });

  it("reads verl's spellings of values", () => {
    expect(overrides('trainer.logger=console').trainer.logger).toEqual(['console']);
    expect(overrides('trainer.logger=["console","tensorboard"]').trainer.logger).toEqual(['console', 'tensorboard']);
    expect(overrides('data.max_prompt_length=1_024').data.max_prompt_length).toBe(1024);
    expect(overrides('actor_rollout_ref.actor.grad_clip=inf').actor_rollout_ref.actor.grad_clip).toBe(Infinity);
    expect(overrides('data.filter_overlong_prompts=True').data.filter_overlong_prompts).toBe(true);
  });

  it('interpolates the environment with ${oc.env:VAR} and ${oc.env:VAR,default}', () => {
    expect(overrides('data.train_files=${oc.env:DATA}/train.parquet').data.train_files).toBe('/data/train.parquet');
    expect(overrides('trainer.project_name=${oc.env:UNSET,fallback}').trainer.project_name).toBe('fallback');
    expect(() => overrides('trainer.project_name=${oc.env:UNSET}')).toThrow('environment variable UNSET is not set');
  });

  it('+key=value sets, ~key deletes back to the default', () => {
    expect(overrides('+trainer.seed=3').trainer.seed).toBe(3);
    expect(overrides('++trainer.seed=3').trainer.seed).toBe(3);
    expect(overrides('trainer.seed=3', '~trainer.seed').trainer.seed).toBe(1);
    expect(overrides('~actor_rollout_ref.rollout.val_kwargs').actor_rollout_ref.rollout.val_kwargs.temperature).toBe(0);
    const deleted = composeConfig({
      overrides: ['actor_rollout_ref.rollout.enforce_eager=True', '~actor_rollout_ref.rollout.enforce_eager'],
    });
    expect(deleted.notes).toEqual([]);
  });

  it('suggests a key only when its last segment is close', () => {
    const problems = (o: string) => {
      try {
        loadConfig({ overrides: [o] });
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };
    expect(problems('actor_rollout_ref.actor.ppo_mini_batchsize=2')).toEqual([
      'unknown key actor_rollout_ref.actor.ppo_mini_batchsize (command line) — did you mean ' +
        'actor_rollout_ref.actor.ppo_mini_batch_size?',
    ]);
    expect(problems('actor_rollout_ref.rollout.beam_width=2')).toEqual([
      'unknown key actor_rollout_ref.rollout.beam_width (command line)',
    ]);
    expect(problems('trainer.experimentname=x')[0]).toContain('did you mean trainer.experiment_name?');
  });

  it('GRPO with rollout.n=1 runs as verl runs it', () => {
    expect(overrides('algorithm.adv_estimator=grpo', 'actor_rollout_ref.rollout.n=1').algorithm.adv_estimator).toBe(
      'grpo',
    );
  });

  it('--cfg job prints the composed YAML without a device; notes go to stderr', async () => {
    const { code, stdout, stderr } = await runCli([
      '--cfg',
      'job',
      ...GSM8K,
      'actor_rollout_ref.rollout.enforce_eager=True',
      'trainer.n_gpus_per_node=8',
    ]);
    expect(code).toBe(0);
    expect(parseYaml(stdout).trainer.n_gpus_per_node).toBe(8);
    expect(stderr).toContain(
      '# ignored 1 key(s) with no meaning on one WebGPU adapter: actor_rollout_ref.rollout.enforce_eager ' +
        '(vLLM/SGLang setting',
    );
  });
});

describe('verl keys beside the schema', () => {
  it('cluster and inference-engine keys are accepted and listed in one line with the reason', () => {
    const { notes } = composeConfig({
      overrides: [
        'actor_rollout_ref.rollout.max_num_seqs=64',
        'actor_rollout_ref.rollout.tensor_model_parallel_size=2',
        'actor_rollout_ref.rollout.enforce_eager=True',
        'actor_rollout_ref.actor.fsdp_config.param_offload=False',
        'critic.model.fsdp_config.param_offload=True',
        'actor_rollout_ref.model.use_remove_padding=True',
        'data.return_raw_chat=True',
        'trainer.default_hdfs_dir=null',
        'actor_rollout_ref.actor.ulysses_sequence_parallel_size=1',
      ],
    });
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(/^ignored 9 key\(s\) with no meaning on one WebGPU adapter: /);
    expect(notes[0]).toContain(
      'actor_rollout_ref.rollout.tensor_model_parallel_size, actor_rollout_ref.actor.ulysses_sequence_parallel_size ' +
        '(GPU-cluster layout; one WebGPU adapter here)',
    );
  });

  it("fsdp_config.optimizer_offload is the actor's and critic's key (critic.fsdp.* as verl 1dda039b spells it)", () => {
    const { config, notes } = composeConfig({
      overrides: [
        'actor_rollout_ref.actor.fsdp_config.optimizer_offload=True',
        'critic.fsdp.optimizer_offload=True',
        'actor_rollout_ref.ref.fsdp_config.optimizer_offload=True',
        'actor_rollout_ref.actor.fsdp_config.param_offload=True',
      ],
    });
    expect(config.actor_rollout_ref.actor.fsdp_config.optimizer_offload).toBe(true);
    expect(config.critic.model.fsdp_config.optimizer_offload).toBe(true);
    // The reference has no optimizer state; weights are not offloaded: both ignored, each with its reason.
    const ignored = notes.find((n) => n.startsWith('ignored'));
    expect(ignored).toContain('actor_rollout_ref.ref.fsdp_config.optimizer_offload (the reference trains nothing');
    expect(ignored).toContain('actor_rollout_ref.actor.fsdp_config.param_offload (weights stay on the device');
    const defaults = composeConfig({ overrides: [] }).config;
    expect(defaults.actor_rollout_ref.actor.fsdp_config.optimizer_offload).toBe(false);
    expect(defaults.critic.model.fsdp_config.optimizer_offload).toBe(false);
  });

  it('deprecated and Search-R1 spellings set the schema key and say so', () => {
    const { config, notes } = composeConfig({
      overrides: [
        'actor_rollout_ref.actor.optim.warmup_style=cosine',
        'actor_rollout_ref.rollout.log_prob_micro_batch_size=8',
        'data.max_start_length=64',
        'data.max_prompt_length=256',
        'actor_rollout_ref.rollout.n_agent=5',
        'data.train_data_num=100',
        'data.shuffle_train_dataloader=False',
        'actor_rollout_ref.actor.state_masking=true',
        'algorithm.no_think_rl=false',
      ],
    });
    expect(config.actor_rollout_ref.actor.optim.lr_scheduler_type).toBe('cosine');
    expect(config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu).toBe(8);
    expect(config.data.max_prompt_length).toBe(64);
    expect(config.actor_rollout_ref.rollout.n).toBe(5);
    expect(config.data.train_max_samples).toBe(100);
    expect(config.data.shuffle).toBe(false);
    expect(notes[0]).toMatch(
      /^read 6 deprecated, renamed \(verl 1dda039b\), recipe or Search-R1 spelling\(s\) as schema keys: .*data.max_start_length → data.max_prompt_length=64/,
    );
  });

  it('values that cannot be honoured are errors saying why', async () => {
    expect(() => loadConfig({ overrides: ['algorithm.no_think_rl=true'] })).toThrow(
      'algorithm.no_think_rl=true (command line) cannot be honoured',
    );
    const { code, stderr } = await runCli([...GSM8K, 'trainer.n_gpus_per_node=8']);
    expect(code).toBe(2);
    expect(stderr).toContain(
      'trainer.n_gpus_per_node=8 × trainer.nnodes=1 cannot be honoured: this engine trains on one WebGPU adapter',
    );
  });

  it(
    "a model path that is no directory (verl's Hub ids) stops before a device is created, saying how to get " + 'it',
    async () => {
      const { code, stderr } = await runCli([
        ...GSM8K,
        'critic.model.path=/nonexistent/critic',
        'algorithm.adv_estimator=gae',
        'actor_rollout_ref.rollout.n=1',
      ]);
      expect(code).toBe(2);
      expect(stderr).toContain(
        'actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct: no such directory — a Hugging Face Hub id? This ' +
          'engine reads ' +
          'local model directories only (no download): `huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct ' +
          '--local-dir DIR`, then actor_rollout_ref.model.path=DIR',
      );
      expect(stderr).toMatch(/critic\.model\.path=\/nonexistent\/critic: no such directory\n/);
      expect(stderr).not.toContain('device:');
    },
  );

  it('a second --config is refused instead of silently winning', async () => {
    for (const argv of [
      ['--config', 'a.yaml', '--config', 'b.yaml'],
      ['--config=a.yaml', '--config', 'b.yaml'],
    ]) {
      const { code, stderr } = await runCli(['--cfg', 'job', ...argv]);
      expect(code).toBe(2);
      expect(stderr.trim()).toBe(
        'configuration error: --config given twice (a.yaml and b.yaml): give one file, and override its keys as ' +
          'key.sub=value',
      );
    }
  });

  it('an empty trainer.default_local_dir is refused: the run would write into the current directory', async () => {
    const { code, stderr } = await runCli(['--cfg', 'job', 'trainer.default_local_dir=']);
    expect(code).toBe(2);
    expect(stderr).toContain(
      'configuration error: trainer.default_local_dir is empty: the run would write its checkpoints and metrics into ' +
        'the current directory',
    );
  });

  it('service loggers are accepted', () => {
    expect(loadConfig({ overrides: ['trainer.logger=["console","wandb","swanlab","mlflow"]'] }).trainer.logger).toEqual(
      ['console', 'wandb', 'swanlab', 'mlflow'],
    );
  });
});
