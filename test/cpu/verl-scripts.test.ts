// verl b178a3cd's launch scripts and Search-R1 a14dc3a's, read from their own files (test/support/data/verl-b178a3cd,
// byte for byte) and run by bash with python3 stubbed (verl-script-argv.ts): with paths pointing at test fixtures,
// each composes (`--cfg job`) to the script's values over verl's defaults, with the cluster-only keys listed as
// ignored in one line; the script that needs what verl's own config lacks stops with one line naming the key.
import { resolve } from 'node:path';
import { describe, it, expect } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { runCli } from '../support/run-cli.ts';
import { HAS_BASH, scriptArgv, VERL_B178A3CD_ROOT, withPaths } from '../support/verl-script-argv.ts';
import { fixturePath } from '../support/fixtures.ts';

const FIXTURES = {
  model: fixturePath('hf/stories260K'),
  data: fixturePath('verl/sample.json'),
  runDir: 'checkpoints/verl-scripts',
};

/** What Slurm sets for an sbatch job on one node of 8 GPUs: GSPO's and SAPO's scripts read it. */
const ONE_SLURM_NODE = {
  SLURM_JOB_NUM_NODES: '1',
  SLURM_NNODES: '1',
  SLURM_GPUS_PER_NODE: '8',
  SLURM_CPUS_PER_TASK: '128',
  SLURM_JOB_NODELIST: 'node0',
};

interface OldScript {
  name: string;
  /** Inside test/support/data/verl-b178a3cd (Search-R1/… for Search-R1's). */
  path: string;
  env?: Record<string, string>;
}

/** The b178a3cd-era command lines this engine was first checked against (issue 36, item 6). */
const OLD_SCRIPTS: OldScript[] = [
  { name: 'PPO with a critic', path: 'examples/ppo_trainer/run_qwen2-7b_seq_balance.sh' },
  { name: 'PPO with a reward model', path: 'examples/ppo_trainer/run_qwen2-7b_rm_seq_balance.sh' },
  { name: 'GRPO', path: 'examples/grpo_trainer/run_qwen2-7b.sh' },
  { name: 'RLOO', path: 'examples/rloo_trainer/run_qwen2-7b.sh' },
  { name: 'REINFORCE++', path: 'examples/reinforce_plus_plus_trainer/run_qwen2-7b_math_rf.sh' },
  { name: 'ReMax', path: 'examples/remax_trainer/run_qwen2.5-3b_seq_balance.sh' },
  { name: 'GSPO on a Slurm node', path: 'examples/gspo_trainer/test_gspo_3b_math.sh', env: ONE_SLURM_NODE },
  { name: 'Search-R1 PPO', path: 'Search-R1/train_ppo.sh' },
  { name: 'Search-R1 GRPO', path: 'Search-R1/train_grpo.sh' },
  {
    name: "GRPO on verl's own config named by --config-path/--config-name",
    path: 'examples/grpo_trainer/run_qwen2-32b_sglang_fsdp_npu.sh',
  },
  { name: 'GMPO', path: 'examples/gmpo_trainer/run_qwen2_5-7b_math.sh' },
  { name: 'GMPO on DAPO-Math with the DAPO reward manager', path: 'examples/gmpo_trainer/test_dapo_7b_math.sh' },
  { name: 'GPG', path: 'examples/gpg_trainer/run_qwen2-7b_math.sh' },
  { name: 'SAPO on a Slurm node', path: 'examples/sapo_trainer/run_qwen30b_sapo.sh', env: ONE_SLURM_NODE },
  { name: 'DAPO with dynamic sampling', path: 'tests/special_e2e/run_dapo.sh' },
  { name: 'GRPO on Qwen3 with vLLM', path: 'examples/grpo_trainer/run_qwen3-8b.sh' },
  { name: 'GRPO on GSM8K and MATH', path: 'examples/grpo_trainer/run_qwen2-7b_math.sh' },
  { name: 'GRPO on DeepSeek', path: 'examples/grpo_trainer/run_deepseek7b_llm.sh' },
  { name: 'PPO on DeepSeek', path: 'examples/ppo_trainer/run_deepseek7b_llm.sh' },
  { name: 'PPO on Gemma', path: 'examples/ppo_trainer/run_gemma.sh' },
  {
    name: "GRPO with verl's tool agent loop (GSM8K tool)",
    path: 'examples/sglang_multiturn/run_qwen2.5-3b_gsm8k_multiturn.sh',
  },
  {
    name: 'Rollout correction: RLOO with sequence-level IS in bypass mode',
    path: 'examples/rollout_correction/run_with_rollout_corr.sh',
  },
  {
    name: 'Rollout correction: token IS with two rejection criteria',
    path: 'examples/rollout_correction/run_with_rollout_corr_multi_rs.sh',
  },
  { name: 'Optimal token baseline', path: 'examples/otb_trainer/run_qwen2_5-7b.sh' },
];

/** A script this engine stops on with one line naming the key: what it says and why it refuses. */
const REFUSED_SCRIPTS: (OldScript & { message: string; why: string })[] = [
  {
    name: 'CISPO',
    path: 'examples/cispo_trainer/run_cispo_qwen2_5_0_5b_gsm8k.sh',
    message: 'unknown key actor_rollout_ref.model.torch_dtype (command line)',
    why: "verl's own config has no actor_rollout_ref.model.torch_dtype either: Hydra stops on it without a leading +",
  },
];

/** The argv bash gives main_ppo when it runs the script at `path` from the vendored root. */
function argvOf(path: string): string[] {
  const script = [...OLD_SCRIPTS, ...REFUSED_SCRIPTS].find((s) => s.path === path);
  if (!script) throw new Error(`${path}: not one of the b178a3cd scripts`);
  return scriptArgv(VERL_B178A3CD_ROOT, script.path, script.env);
}

/** The script's own `key=value` for a key, as the composed config should hold it. */
function scriptValue(argv: readonly string[], key: string): string | undefined {
  const arg = [...argv].reverse().find((a) => a.replace(/^\+\+?/, '').startsWith(`${key}=`));
  return arg?.slice(arg.indexOf('=') + 1);
}

describe.skipIf(!HAS_BASH)(
  'verl b178a3cd and Search-R1 a14dc3a launch scripts, run by bash with python3 stubbed',
  () => {
    it('are the 23 verl and 2 Search-R1 scripts of the b178a3cd era', () =>
      expect([OLD_SCRIPTS.length, REFUSED_SCRIPTS.length]).toEqual([24, 1]));

    for (const script of OLD_SCRIPTS) {
      it(`${script.name} (${script.path}) composes with --cfg job`, async () => {
        const argv = argvOf(script.path);
        const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...withPaths(argv, FIXTURES)]);
        expect(code, stderr).toBe(0);
        const config = parseYaml(stdout);
        expect(config.algorithm.adv_estimator).toBe(scriptValue(argv, 'algorithm.adv_estimator') ?? 'gae');
        expect(config.actor_rollout_ref.model.path).toBe(FIXTURES.model);
        expect(config.data.train_batch_size).toBe(Number(scriptValue(argv, 'data.train_batch_size')));
        // A script that leaves n_gpus_per_node out gets this engine's default of one adapter.
        expect(config.trainer.n_gpus_per_node).toBe(Number(scriptValue(argv, 'trainer.n_gpus_per_node') ?? 1));
        // One line lists every ignored key with its reason (none for a script without cluster keys); nothing else is
        // reported unless the script uses a deprecated or forked spelling.
        const notes = stderr.trim().split('\n');
        expect(notes.filter((n) => n.startsWith('# ignored ')).length).toBe(
          argv.some((a) => /gpu_memory_utilization|n_gpus_per_node|nnodes|fsdp_config|tensor_model_parallel/.test(a))
            ? 1
            : 0,
        );
        // verl's rollout.name=vllm without server_urls keeps generating in-process, as before rollout servers existed.
        expect(['vllm', 'sglang']).toContain(config.actor_rollout_ref.rollout.name);
        expect(config.actor_rollout_ref.rollout.server_urls).toEqual([]);
      });
    }

    for (const script of REFUSED_SCRIPTS) {
      it(`${script.name} (${script.path}) stops with one line naming the key: ${script.why}`, async () => {
        const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...withPaths(argvOf(script.path), FIXTURES)]);
        expect(code).toBe(2);
        expect(stdout).toBe('');
        expect(stderr).toContain(script.message);
      });
    }

    /** The composed config of the launch script at `path`. */
    async function composed(path: string) {
      const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...withPaths(argvOf(path), FIXTURES)]);
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
        const { config } = await composed('Search-R1/train_grpo.sh');
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
        const { config } = await composed('examples/sglang_multiturn/run_qwen2.5-3b_gsm8k_multiturn.sh');
        const multiTurn = config.actor_rollout_ref.rollout.multi_turn;
        expect(multiTurn.enable).toBe(true);
        expect(multiTurn.max_assistant_turns).toBe(5);
        // The script names its config folder and tool config from $(pwd), verl's root.
        expect(multiTurn.tool_config_path).toBe(
          resolve(VERL_B178A3CD_ROOT, 'examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml'),
        );
        expect(multiTurn.format).toBe('hermes');
      },
    );

    it("GSPO keeps the paper's clip range and the DAPO reward manager's keys", async () => {
      const { config } = await composed('examples/gspo_trainer/test_gspo_3b_math.sh');
      expect(config.actor_rollout_ref.actor.clip_ratio_low).toBe(0.0003);
      expect(config.actor_rollout_ref.actor.policy_loss.loss_mode).toBe('gspo');
      expect(config.reward_model.reward_manager).toBe('dapo');
      expect(config.reward_model.reward_kwargs).toEqual({
        overlong_buffer_cfg: { enable: false, len: 4096, penalty_factor: 1, log: false },
        max_resp_len: 8192,
      });
    });
  },
);

describe("verl b178a3cd's own config files, read with --config", () => {
  it(
    "--config with verl's own ppo_trainer.yaml loads: its defaults list and hydra block are skipped, its keys " +
      'read',
    async () => {
      const { code, stdout, stderr } = await runCli([
        '--cfg',
        'job',
        '--config',
        `${VERL_B178A3CD_ROOT}/verl/trainer/config/ppo_trainer.yaml`,
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
      const generated = `${VERL_B178A3CD_ROOT}/verl/trainer/config/_generated_ppo_trainer.yaml`;
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
