// Launch scripts of verl's examples/ and of Search-R1 (verl-launch-scripts.ts, their argv as written): with paths
// pointing at test fixtures, each composes (`--cfg job`) to the script's values over verl's defaults, with the
// cluster-only keys listed as ignored in one line; the scripts that need a feature this engine lacks stop with one
// line naming the key.
import { describe, it, expect } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { runCli } from '../support/run-cli.ts';
import { LAUNCH_SCRIPTS, REFUSED_LAUNCH_SCRIPTS, withPaths } from '../support/verl-launch-scripts.ts';
import { fixturePath } from '../support/fixtures.ts';

const FIXTURES = {
  model: fixturePath('hf/stories260K'),
  data: fixturePath('verl/sample.json'),
  runDir: 'checkpoints/verl-scripts',
};

/** The script's own `key=value` for a key, as the composed config should hold it. */
function scriptValue(argv: readonly string[], key: string): string | undefined {
  const arg = [...argv].reverse().find((a) => a.replace(/^\+\+?/, '').startsWith(`${key}=`));
  return arg?.slice(arg.indexOf('=') + 1);
}

describe('verl and Search-R1 launch scripts', () => {
  for (const script of LAUNCH_SCRIPTS) {
    it(`${script.name} (${script.source}) composes with --cfg job`, async () => {
      const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...withPaths(script.argv, FIXTURES)]);
      expect(code, stderr).toBe(0);
      const config = parseYaml(stdout);
      expect(config.algorithm.adv_estimator).toBe(scriptValue(script.argv, 'algorithm.adv_estimator') ?? 'gae');
      expect(config.actor_rollout_ref.model.path).toBe(FIXTURES.model);
      expect(config.data.train_batch_size).toBe(Number(scriptValue(script.argv, 'data.train_batch_size')));
      // A script that leaves n_gpus_per_node out gets this engine's default of one adapter.
      expect(config.trainer.n_gpus_per_node).toBe(Number(scriptValue(script.argv, 'trainer.n_gpus_per_node') ?? 1));
      // One line lists every ignored key with its reason (none for a script without cluster keys); nothing else is
      // reported unless the script uses a deprecated or forked spelling.
      const notes = stderr.trim().split('\n');
      expect(notes.filter((n) => n.startsWith('# ignored ')).length).toBe(
        script.argv.some((a) =>
          /gpu_memory_utilization|n_gpus_per_node|nnodes|fsdp_config|tensor_model_parallel/.test(a),
        )
          ? 1
          : 0,
      );
      // verl's rollout.name=vllm without server_urls keeps generating in-process, as before rollout servers existed.
      expect(['vllm', 'sglang']).toContain(config.actor_rollout_ref.rollout.name);
      expect(config.actor_rollout_ref.rollout.server_urls).toEqual([]);
    });
  }

  for (const script of REFUSED_LAUNCH_SCRIPTS) {
    it(`${script.name} (${script.source}) stops with one line naming the key: ${script.refused.why}`, async () => {
      const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...withPaths(script.argv, FIXTURES)]);
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toContain(script.refused.message);
    });
  }

  /** The composed config of the launch script taken from `source`. */
  async function composed(source: string) {
    const script = LAUNCH_SCRIPTS.find((s) => s.source === `verl ${source}`)!;
    const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...withPaths(script.argv, FIXTURES)]);
    expect(code, stderr).toBe(0);
    return { config: parseYaml(stdout), stderr };
  }

  it("the new policy losses and estimators of verl's examples take effect: GMPO, GPG, SAPO", async () => {
    const gmpo = (await composed('examples/gmpo_trainer/run_qwen2_5-7b_math.sh')).config.actor_rollout_ref.actor;
    expect([gmpo.policy_loss.loss_mode, gmpo.clip_ratio_low, gmpo.clip_ratio_high]).toEqual(['geo_mean', 0.4, 0.4]);
    const gpg = (await composed('examples/gpg_trainer/run_qwen2-7b_math.sh')).config;
    expect([gpg.algorithm.adv_estimator, gpg.actor_rollout_ref.actor.policy_loss.loss_mode]).toEqual(['gpg', 'gpg']);
    const sapo = await composed('examples/sapo_trainer/run_qwen30b_sapo.sh');
    const actor = sapo.config.actor_rollout_ref.actor;
    expect([actor.policy_loss.loss_mode, actor.tau_pos, actor.tau_neg]).toEqual(['sapo', 1, 1.05]);
    // --config-path=./config --config-name=ppo_trainer: verl's own config, built in.
    expect(sapo.stderr).toContain("ppo_trainer is verl's own config");
    expect(sapo.config.data.max_response_length).toBe(8192);
    const otb = (await composed('examples/otb_trainer/run_qwen2_5-7b.sh')).config;
    expect([otb.algorithm.adv_estimator, otb.actor_rollout_ref.actor.calculate_sum_pi_squared]).toEqual([
      'optimal_token_baseline',
      true,
    ]);
  });

  it("DAPO: dynamic sampling, clip-higher and the recipe's overlong_buffer spelling take effect", async () => {
    const { config, stderr } = await composed('tests/special_e2e/run_dapo.sh');
    expect(config.algorithm.filter_groups).toEqual({ enable: true, metric: 'seq_reward', max_num_gen_batches: 10 });
    expect(config.data.gen_batch_size).toBe(1024);
    expect(config.actor_rollout_ref.actor.clip_ratio_high).toBe(0.28);
    expect(config.reward_model.reward_manager).toBe('dapo');
    expect(config.reward_model.reward_kwargs.overlong_buffer_cfg).toEqual({
      enable: true,
      len: 128,
      penalty_factor: 1,
      log: false,
    });
    expect(stderr).toContain(
      'reward_model.overlong_buffer.len → reward_model.reward_kwargs.overlong_buffer_cfg.len=128',
    );
    const gmpoDapo = (await composed('examples/gmpo_trainer/test_dapo_7b_math.sh')).config;
    expect(gmpoDapo.actor_rollout_ref.actor.policy_loss.loss_mode).toBe('geo_mean');
    expect(gmpoDapo.reward_model.reward_kwargs).toEqual({
      overlong_buffer_cfg: { enable: true, len: 4096, penalty_factor: 1, log: false },
      max_resp_len: 8192,
    });
    expect([gmpoDapo.data.prompt_key, gmpoDapo.data.truncation]).toEqual(['prompt', 'left']);
  });

  it(
    'Search-R1 spellings take effect: max_start_length is the prompt limit, n_agent the samples per prompt, search ' +
      'is on',
    async () => {
      const grpo = LAUNCH_SCRIPTS.find((s) => s.source === 'Search-R1 train_grpo.sh')!;
      const { stdout } = await runCli(['--cfg', 'job', ...withPaths(grpo.argv, FIXTURES)]);
      const config = parseYaml(stdout);
      expect(config.data.max_prompt_length).toBe(2048);
      expect(config.actor_rollout_ref.rollout.n).toBe(5);
      expect(config.data.train_max_samples).toBe(-1);
      expect(config.do_search).toBe(true);
      expect(config.actor_rollout_ref.actor.ppo_micro_batch_size).toBe(64);
      expect(config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu).toBe(128);
      expect(config.trainer.logger).toEqual(['wandb']);
    },
  );

  it(
    "the GSM8K tool-agent script turns verl's tool agent loop on: its config file's turn limit, its tool " + 'config',
    async () => {
      const script = LAUNCH_SCRIPTS.find((s) => s.source.startsWith('verl examples/sglang_multiturn/'))!;
      const { stdout } = await runCli(['--cfg', 'job', ...withPaths(script.argv, FIXTURES)]);
      const multiTurn = parseYaml(stdout).actor_rollout_ref.rollout.multi_turn;
      expect(multiTurn.enable).toBe(true);
      expect(multiTurn.max_assistant_turns).toBe(5);
      expect(multiTurn.tool_config_path).toBe(
        'test/support/data/verl-sglang-multiturn-config/tool_config/gsm8k_tool_config.yaml',
      );
      expect(multiTurn.format).toBe('hermes');
    },
  );

  it("GSPO keeps the paper's clip range and the DAPO reward manager's keys", async () => {
    const gspo = LAUNCH_SCRIPTS.find((s) => s.name === 'GSPO')!;
    const { stdout } = await runCli(['--cfg', 'job', ...withPaths(gspo.argv, FIXTURES)]);
    const config = parseYaml(stdout);
    expect(config.actor_rollout_ref.actor.clip_ratio_low).toBe(0.0003);
    expect(config.actor_rollout_ref.actor.policy_loss.loss_mode).toBe('gspo');
    expect(config.reward_model.reward_manager).toBe('dapo');
    expect(config.reward_model.reward_kwargs).toEqual({
      overlong_buffer_cfg: { enable: false, len: 4096, penalty_factor: 1, log: false },
      max_resp_len: 8192,
    });
  });

  it(
    "--config with verl's own ppo_trainer.yaml loads: its defaults list and hydra block are skipped, its keys " +
      'read',
    async () => {
      const { code, stdout, stderr } = await runCli([
        '--cfg',
        'job',
        '--config',
        'test/support/data/verl-ppo_trainer.yaml',
        `actor_rollout_ref.model.path=${FIXTURES.model}`,
      ]);
      expect(code, stderr).toBe(0);
      expect(stderr).toContain('# skipped the defaults: block');
      const config = parseYaml(stdout);
      expect(config.data.max_prompt_length).toBe(512);
      expect(config.trainer.project_name).toBe('verl_examples');
    },
  );

  it(
    "--config with verl's generated config loads every key: unimplemented features at their defaults, cluster keys " +
      'ignored',
    async () => {
      const generated = 'test/support/data/verl-b178a3cd/verl/trainer/config/_generated_ppo_trainer.yaml';
      const { code, stdout, stderr } = await runCli([
        '--cfg',
        'job',
        '--config',
        generated,
        `actor_rollout_ref.model.path=${FIXTURES.model}`,
      ]);
      expect(code, stderr).toBe(0);
      const config = parseYaml(stdout);
      expect(config.actor_rollout_ref.actor.optim.lr_scheduler_type).toBe('constant');
      expect(config.critic.ppo_mini_batch_size).toBe(256);
      expect(config.critic.forward_max_token_len_per_gpu).toBe(32768);
      expect(config.data.seed).toBe(1);
      // fsdp_config.model_dtype is a key here (frozen models' stored dtype): verl's generated config pins fp32.
      expect(config.actor_rollout_ref.ref.fsdp_config.model_dtype).toBe('fp32');
      expect(config.critic.model.fsdp_config.model_dtype).toBe('fp32');
      // A feature verl has and this engine lacks is refused when asked for, never silently dropped.
      const refused = await runCli([
        '--cfg',
        'job',
        '--config',
        generated,
        'actor_rollout_ref.model.tiled_mlp.enabled=true',
      ]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(
        'actor_rollout_ref.model.tiled_mlp.enabled=true (command line): this verl feature is not implemented here; ' +
          "only verl's default false is accepted",
      );
      // Implemented since: verl's generated config holds the optimal token baseline's keys at their defaults.
      expect(config.actor_rollout_ref.actor.calculate_sum_pi_squared).toBe(false);
      expect(config.actor_rollout_ref.actor.sum_pi_squared_checkpointing).toBe(false);
    },
  );
});
