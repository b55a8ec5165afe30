// verl HEAD (1dda039b) as its users run it, read from verl's own files (test/support/data/verl-1dda039b, byte for
// byte): its generated config loads with no problem and the launch scripts a one-GPU user would run compose with
// `--cfg job`, each key that used to be refused taking effect; the two b178a3cd command lines that were refused again
// (verl's own ppo_megatron_trainer, Search-R1's multi_turn.format: qwen) compose too.
import { describe, it, expect } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { runCli } from '../support/run-cli.ts';
import { fixturePath } from '../support/fixtures.ts';
import {
  HAS_BASH,
  rstBlockArgv,
  scriptArgv,
  VERL_B178A3CD_ROOT,
  VERL_HEAD_ROOT,
  withPaths,
} from '../support/verl-script-argv.ts';
import { ADV_ESTIMATORS } from '../../ppo/config/schema.ts';

const FIXTURES = {
  model: fixturePath('hf/stories260K'),
  data: fixturePath('verl/sample.json'),
  runDir: 'checkpoints/verl-head-scripts',
};
const GENERATED = `${VERL_HEAD_ROOT}/verl/trainer/config/_generated_ppo_trainer.yaml`;

/** The composed config (and notes) of argv with the fixtures' paths, failing the test on a problem. */
async function compose(argv: readonly string[]) {
  const { code, stdout, stderr } = await runCli(['--cfg', 'job', ...argv]);
  expect(code, stderr).toBe(0);
  return { config: parseYaml(stdout), stderr };
}

/** The argv's own value for a key (the last one wins, as in Hydra). */
function argValue(argv: readonly string[], key: string): string | undefined {
  const arg = [...argv].reverse().find((a) => a.replace(/^\+\+?/, '').startsWith(`${key}=`));
  return arg?.slice(arg.indexOf('=') + 1);
}

/** The one "# ignored …" note's text. */
const ignoredNote = (stderr: string) => stderr.split('\n').find((line) => line.startsWith('# ignored ')) ?? '';

describe("verl 1dda039b's generated config (verl/trainer/config/_generated_ppo_trainer.yaml)", () => {
  it('loads with no problem and follows its defaults', async () => {
    const { config, stderr } = await compose(['--config', GENERATED]);
    expect(stderr).not.toContain('unknown key');
    const { rollout, model } = config.actor_rollout_ref;
    // verl 614ffc04c (#6616): old log-probs are recomputed by default.
    expect(rollout.calculate_log_probs).toBe(true);
    expect(config.algorithm.filter_groups.metric).toBe(null);
    expect(rollout.agent.default_agent_loop).toBe('single_turn_agent');
    expect(rollout.multi_turn.enable).toBe(false);
    // critic.fsdp is 1dda039b's critic.model.fsdp_config.
    expect(config.critic.model.fsdp_config.model_dtype).toBe('fp32');
    // The legacy reward trees are all null ("not set"): reward.* gives the values.
    expect(config.reward_model.reward_manager).toBe('naive');
    expect(config.reward_model.enable).toBe(false);
    expect(config.custom_reward_function.name).toBe('compute_score');
    // Its nested lora block has rank 0, so its alpha 32 and Megatron module names leave the flat keys alone.
    expect([model.lora_rank, model.lora_alpha, model.target_modules]).toEqual([0, 16, ['all-linear']]);
    expect(config.distillation.enabled).toBe(false);
    expect(config.distillation.teacher_models).toEqual({ teacher_model: { key: null, model_path: null } });
    expect(ignoredNote(stderr)).toContain('trainer.v1.trainer_mode');
    expect(ignoredNote(stderr)).toContain('actor_rollout_ref.rollout.checkpoint_engine.backend');
  });

  it("the schema's defaults are the generated config's, but for verl's example paths and this engine's own choices", async () => {
    const model = `actor_rollout_ref.model.path=${FIXTURES.model}`;
    const flat = (value: unknown, prefix = '', out = new Map<string, unknown>()): Map<string, unknown> => {
      if (
        value !== null &&
        typeof value === 'object' &&
        !Array.isArray(value) &&
        prefix !== 'distillation.teacher_models'
      )
        for (const [k, v] of Object.entries(value)) flat(v, prefix ? `${prefix}.${k}` : k, out);
      else out.set(prefix, JSON.stringify(value));
      return out;
    };
    const ours = flat((await compose([model])).config);
    const verls = flat((await compose(['--config', GENERATED, model])).config);
    const differ = [...ours.keys()].filter((key) => ours.get(key) !== verls.get(key));
    expect(differ).toEqual([
      // verl's example data and its critic's and reward model's example paths.
      'data.train_files',
      'data.val_files',
      // verl pins fp32 for FSDP's master copies; here null keeps a frozen model in its checkpoint's dtype.
      'actor_rollout_ref.actor.fsdp_config.model_dtype',
      // verl computes in bfloat16 (FSDP mixed precision); float32 here, as bf16 compute made the built-in job slower on
      // lavapipe's both device classes (docs/models-and-memory.md).
      'actor_rollout_ref.actor.fsdp_config.dtype',
      // verl's server mode is async; here async is one-step-off generation and sync the default.
      'actor_rollout_ref.rollout.mode',
      // verl decodes in bfloat16 (vLLM's serving dtype); float32 here keeps rollout and training log-probs equal.
      'actor_rollout_ref.rollout.dtype',
      'actor_rollout_ref.ref.fsdp_config.model_dtype',
      'critic.model.path',
      'critic.model.fsdp_config.model_dtype',
      'critic.model.fsdp_config.dtype',
      // wandb is skipped here; the file logger writes verl's JSONL.
      'trainer.logger',
      // One adapter.
      'trainer.n_gpus_per_node',
    ]);
  });

  it('reward.* gives way to a legacy reward key that is set, as verl migrates them (DAPO passes the legacy one)', async () => {
    const dapo = await compose(['--config', GENERATED, 'reward_model.reward_manager=dapo']);
    expect(dapo.config.reward_model.reward_manager).toBe('dapo');
    const renamed = await compose(['--config', GENERATED, 'reward.reward_manager.name=dapo']);
    expect(renamed.config.reward_model.reward_manager).toBe('dapo');
    // A later null of a reward.* key is "not set" again, as in verl.
    const unset = await compose([
      'reward.custom_reward_function.path=/rewards/mine.py',
      'reward.custom_reward_function.path=null',
    ]);
    expect(unset.config.custom_reward_function.path).toBe(null);
    const kwargs = await compose([
      '--config',
      GENERATED,
      `actor_rollout_ref.model.path=${FIXTURES.model}`,
      'reward_model.reward_manager=dapo',
      '+reward.reward_kwargs.overlong_buffer_cfg.enable=True',
      '+reward.reward_kwargs.overlong_buffer_cfg.len=64',
    ]);
    expect(kwargs.config.reward_model.reward_kwargs.overlong_buffer_cfg).toMatchObject({ enable: true, len: 64 });
  });

  it('the nested lora.* set the flat keys when lora.rank > 0, Megatron module names read as the projections', async () => {
    const { config } = await compose([
      '--config',
      GENERATED,
      'actor_rollout_ref.model.lora.rank=8',
      'actor_rollout_ref.model.lora.target_modules=[linear_qkv,linear_fc2]',
    ]);
    const { model } = config.actor_rollout_ref;
    expect([model.lora_rank, model.lora_alpha]).toEqual([8, 32]);
    expect(model.target_modules).toEqual(['q_proj', 'k_proj', 'v_proj', 'down_proj']);
    expect(model.exclude_modules).toBe(null);
    // The critic's nested block the same way (its alpha 32 and Megatron names from the generated config).
    const critic = (
      await compose([
        '--config',
        GENERATED,
        'critic.model.lora.rank=4',
        'critic.model.lora.exclude_modules=[linear_proj]',
      ])
    ).config.critic.model;
    expect([critic.lora_rank, critic.lora_alpha, critic.exclude_modules]).toEqual([4, 32, ['o_proj']]);
    expect(critic.target_modules).toEqual([
      'q_proj',
      'k_proj',
      'v_proj',
      'o_proj',
      'gate_proj',
      'up_proj',
      'down_proj',
    ]);
    const refused = await runCli(['--cfg', 'job', 'critic.model.lora.rank=8', 'critic.model.lora.adapter_path=/x']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('critic.model.lora.adapter_path="/x" (command line): this verl feature is not');
  });

  it('accepts what means nothing on one adapter with one note line: model_engine, checkpoint_engine, trainer.v1', async () => {
    const { stderr } = await compose([
      '--config',
      GENERATED,
      'model_engine=megatron',
      'actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=4096',
      'trainer.v1.trainer_mode=separate_async',
    ]);
    const note = ignoredNote(stderr);
    expect(note).toMatch(/model_engine[^;]*\(FSDP\/Megatron setting/);
    expect(note).toContain('actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes');
    expect(stderr.split('\n').filter((line) => line.startsWith('# ignored '))).toHaveLength(1);
  });

  it('refuses what it cannot honour in one line naming the key', async () => {
    const cases: [string[], string][] = [
      [['algorithm.filter_groups.enable=true'], 'algorithm.filter_groups.metric is null'],
      [['actor_rollout_ref.actor.qat.enable=true'], 'quantization-aware training is not implemented'],
      [['actor_rollout_ref.model.mtp.enable=true'], 'multi-token prediction is not implemented'],
      [
        [
          'actor_rollout_ref.model.lora.merge=true',
          'actor_rollout_ref.rollout.name=sglang',
          'actor_rollout_ref.rollout.server_urls=[http://localhost:30000]',
        ],
        'actor_rollout_ref.model.lora.merge=true with actor_rollout_ref.rollout.server_urls',
      ],
      [['distillation.teacher_models.t.modelpath=x'], 'unknown key distillation.teacher_models.t.modelpath'],
    ];
    for (const [argv, message] of cases) {
      const { code, stderr } = await runCli(['--cfg', 'job', '--config', GENERATED, ...argv]);
      expect(code, argv.join(' ')).toBe(2);
      expect(stderr).toContain(message);
    }
  });

  it("a distillation run checks verl's DistillationConfig before loading anything, after --cfg job printed it", async () => {
    const model = `actor_rollout_ref.model.path=${FIXTURES.model}`;
    const cases: [string[], string][] = [
      [[], 'model_path must be specified for distillation teacher model config.'],
      [
        [
          `distillation.teacher_models.teacher_model.model_path=${FIXTURES.model}`,
          'distillation.distillation_loss.loss_mode=k1',
          'distillation.distillation_loss.use_policy_gradient=false',
        ],
        'Directly backpropagating k1 loss is incorrect',
      ],
      [
        [
          `+distillation.teacher_models.a.model_path=${FIXTURES.model}`,
          '+distillation.teacher_models.a.key=gsm8k',
          `+distillation.teacher_models.b.model_path=${FIXTURES.model}`,
          '+distillation.teacher_models.b.key=gsm8k',
        ],
        'Duplicate teacher key gsm8k found in teacher models. (distillation.teacher_models.b.key)',
      ],
    ];
    for (const [extra, message] of cases) {
      const argv = [model, 'distillation.enabled=true', ...extra];
      expect((await runCli(['--cfg', 'job', ...argv])).code, extra.join(' ')).toBe(0);
      const run = await runCli(argv);
      expect(run.code, extra.join(' ')).toBe(2);
      expect(run.stderr).toContain(message);
    }
  });

  it('--help names the verl commit the keys and defaults follow', async () => {
    const { stdout } = await runCli(['--help']);
    expect(stdout).toContain('Keys and defaults follow verl-project/verl 1dda039b (2026-08-22)');
    expect(stdout).toContain('<name>.model_path = null');
  });
});

interface HeadScript {
  name: string;
  /** Inside test/support/data/verl-1dda039b (verl-recipe/… for verl-recipe's). */
  path: string;
  env?: Record<string, string>;
  /** What the key that used to be refused does once composed. */
  check?: (config: any, stderr: string, argv: readonly string[]) => void;
}

/** Issue 36's 26 scripts: verl's quickstart and examples a one-GPU user runs, verl-recipe's DAPO and tool agent. */
const HEAD_SCRIPTS: HeadScript[] = [
  {
    name: 'quickstart',
    path: 'docs/start/quickstart.rst',
    check: (config) => expect(config.critic.model.path).toBe(FIXTURES.model),
  },
  {
    name: 'PPO',
    path: 'examples/ppo_trainer/run_qwen3_8b_fsdp.sh',
    check: (_config, stderr) => expect(ignoredNote(stderr)).toContain('critic.fsdp.param_offload'),
  },
  { name: 'GRPO', path: 'examples/grpo_trainer/run_qwen3_8b_fsdp.sh' },
  {
    name: 'LoRA',
    path: 'examples/tuning/lora/run_qwen3_8b_fsdp.sh',
    check: (config, _stderr, argv) =>
      expect(config.actor_rollout_ref.model.lora_rank).toBe(
        Number(argValue(argv, 'actor_rollout_ref.model.lora_rank')),
      ),
  },
  {
    name: 'LoRA merge',
    path: 'examples/tuning/lora/run_qwen3_8b_merge_fsdp.sh',
    check: (config) => expect(config.actor_rollout_ref.model.lora).toEqual({ merge: true }),
  },
  {
    name: 'LoRA from adapter',
    path: 'examples/tuning/lora/run_qwen3_8b_from_adapter_fsdp.sh',
    env: { LORA_ADAPTER_PATH: '/adapters/qwen3_8b_gsm8k' },
    check: (config) => expect(config.actor_rollout_ref.model.lora_adapter_path).toBe('/adapters/qwen3_8b_gsm8k'),
  },
  { name: 'GSPO', path: 'examples/gspo_trainer/run_qwen3_8b_fsdp.sh' },
  {
    name: 'GDPO',
    path: 'examples/gdpo_trainer/run_qwen3_8b_fsdp.sh',
    check: (config) => {
      expect(config.algorithm.gdpo_reward_keys).toEqual(['accuracy_reward', 'format_reward']);
      expect(config.reward_model.reward_manager).toBe('gdpo');
      expect(config.custom_reward_function.path).toMatch(/verl\/utils\/reward_score\/rlla\.py$/);
    },
  },
  { name: 'CISPO', path: 'examples/cispo_trainer/run_qwen3_8b_fsdp.sh' },
  { name: 'GMPO', path: 'examples/gmpo_trainer/run_qwen3_8b_fsdp.sh' },
  { name: 'GPG', path: 'examples/gpg_trainer/run_qwen3_8b_fsdp.sh' },
  {
    name: 'SAPO',
    path: 'examples/sapo_trainer/run_qwen3_8b_fsdp.sh',
    check: (config, stderr) => {
      expect([config.actor_rollout_ref.actor.tau_pos, config.actor_rollout_ref.actor.tau_neg]).toEqual([1, 1.05]);
      expect(ignoredNote(stderr)).toContain("policy_loss.tau_neg (verl's SAPO reads actor.tau_pos");
    },
  },
  { name: 'OTB', path: 'examples/otb_trainer/run_qwen3_8b_fsdp.sh' },
  { name: 'REINFORCE++', path: 'examples/reinforce_plus_plus_trainer/run_qwen3_8b_fsdp.sh' },
  { name: 'RLOO', path: 'examples/rloo_trainer/run_qwen3_8b_fsdp.sh' },
  { name: 'ReMax', path: 'examples/remax_trainer/run_qwen3_8b_fsdp.sh' },
  { name: 'ReMax math, sync', path: 'examples/remax_trainer/run_qwen2.5_math_7b_sync_fsdp.sh' },
  { name: 'rollout correction', path: 'examples/rollout_correction/run_qwen2_5_7b_fsdp.sh' },
  { name: 'rollout correction, several RS', path: 'examples/rollout_correction/run_qwen2_5_7b_fsdp_multi_rs.sh' },
  {
    name: 'prefix grouper',
    path: 'examples/prefix_grouper/run_qwen3_8b_fsdp.sh',
    check: (_config, stderr) => expect(ignoredNote(stderr)).toContain('use_prefix_grouper (a speed feature'),
  },
  {
    name: 'on-policy distillation',
    path: 'examples/on_policy_distillation_trainer/run_qwen3_8b_fsdp.sh',
    check: (config) => {
      expect(config.distillation.enabled).toBe(true);
      expect(config.distillation.teacher_models).toEqual({
        teacher_model: { key: null, model_path: 'Qwen/Qwen3-32B' },
      });
      expect(config.distillation.distillation_loss).toMatchObject({ loss_mode: 'k1', topk: 64, loss_max_clamp: 10 });
    },
  },
  {
    name: 'on-policy distillation, two teachers',
    path: 'examples/on_policy_distillation_trainer/run_qwen3_8b_mopd_fsdp.sh',
    check: (config) =>
      expect(config.distillation.teacher_models).toEqual({
        teacher_model: { key: null, model_path: null },
        gsm8k: { key: 'openai/gsm8k', model_path: 'Qwen/Qwen3-32B' },
        geo3k: { key: 'hiyouga/geometry3k', model_path: 'Qwen/Qwen3-VL-32B-Instruct' },
      }),
  },
  {
    name: 'reward model',
    path: 'examples/grpo_trainer/run_mistral_nemo_12b_skyworkrm_fsdp.sh',
    check: (config) => {
      expect(config.reward_model.enable).toBe(true);
      expect(config.reward_model.model.path).toBe('Skywork/Skywork-Reward-Llama-3.1-8B');
    },
  },
  {
    name: 'function reward',
    path: 'tests/special_e2e/ppo_trainer/run_function_reward.sh',
    check: (config) => expect(config.custom_reward_function).toMatchObject({ path: null, name: 'compute_score' }),
  },
  {
    name: 'DAPO (verl-recipe)',
    path: 'verl-recipe/dapo/test_dapo_7b_math.sh',
    check: (config) => {
      expect(config.reward_model.reward_manager).toBe('dapo');
      expect(config.reward_model.reward_kwargs.overlong_buffer_cfg).toMatchObject({ enable: true, len: 4096 });
    },
  },
  {
    name: 'tool agent (verl-recipe)',
    path: 'verl-recipe/partial_rollout/run/run_qwen3-0.6b_gsm8k_grpo_tool_baseline.sh',
    check: (config) => {
      const { rollout } = config.actor_rollout_ref;
      expect(rollout.agent.default_agent_loop).toBe('tool_agent');
      expect(rollout.multi_turn.enable).toBe(true);
      expect(rollout.multi_turn.tool_config_path).toMatch(/partial_rollout\/run\/gsm8k_tool_config\.yaml$/);
    },
  },
];

function headArgv(script: HeadScript): string[] {
  return script.path.endsWith('.rst')
    ? rstBlockArgv(VERL_HEAD_ROOT, script.path)
    : scriptArgv(VERL_HEAD_ROOT, script.path, script.env);
}

describe.skipIf(!HAS_BASH)("verl 1dda039b's launch scripts, run by bash with python3 stubbed", () => {
  it('are the 26 of issue 36', () => expect(HEAD_SCRIPTS).toHaveLength(26));

  for (const script of HEAD_SCRIPTS) {
    it(`${script.name} (${script.path}) composes with --cfg job`, async () => {
      const argv = headArgv(script);
      const estimator = argValue(argv, 'algorithm.adv_estimator') ?? 'gae';
      // GDPO's estimator is the algorithms work of issue 36: until the estimator table has it, the one line refusing
      // it must be the only problem.
      if (!(ADV_ESTIMATORS as readonly string[]).includes(estimator)) {
        const { code, stderr } = await runCli(['--cfg', 'job', ...withPaths(argv, FIXTURES)]);
        expect(code).toBe(2);
        expect(stderr.trim()).toMatch(
          new RegExp(
            `^configuration error: algorithm.adv_estimator \\(command line\\): unknown value "${estimator}"[^\\n]*$`,
          ),
        );
        const { config, stderr: notes } = await compose(
          withPaths(argv, FIXTURES)
            .map((a) => (a === `algorithm.adv_estimator=${estimator}` ? '' : a))
            .filter(Boolean),
        );
        script.check?.(config, notes, argv);
        return;
      }
      const { config, stderr } = await compose(withPaths(argv, FIXTURES));
      expect(config.algorithm.adv_estimator).toBe(estimator);
      expect(config.actor_rollout_ref.model.path).toBe(FIXTURES.model);
      expect(config.data.train_batch_size).toBe(Number(argValue(argv, 'data.train_batch_size')));
      script.check?.(config, stderr, argv);
    });
  }
});

describe.skipIf(!HAS_BASH)('the two b178a3cd command lines that were refused again', () => {
  it("verl's own --config-path=./config --config-name=ppo_megatron_trainer (DeepSeek 671B GRPO) is built in", async () => {
    const argv = scriptArgv(VERL_B178A3CD_ROOT, 'examples/grpo_trainer/run_deepseek671b_math_megatron_80gb.sh');
    expect(argv.slice(0, 2)).toEqual(['--config-path=./config', '--config-name=ppo_megatron_trainer']);
    const { config, stderr } = await compose(withPaths(argv, FIXTURES));
    expect(stderr).toContain("ppo_megatron_trainer is verl's own config: verl's defaults with Megatron sharding");
    expect(config.algorithm.adv_estimator).toBe('grpo');
  });

  it('Search-R1 multi-turn: search_multiturn_grpo.yaml with multi_turn.format: qwen, read as hermes', async () => {
    const argv = scriptArgv(
      VERL_B178A3CD_ROOT,
      'examples/sglang_multiturn/search_r1_like/run_qwen2.5-3b_instruct_search_multiturn.sh',
    );
    expect(argv).toContain('--config-name=search_multiturn_grpo');
    const { config, stderr } = await compose(withPaths(argv, FIXTURES));
    expect(config.actor_rollout_ref.rollout.multi_turn).toMatchObject({ enable: true, format: 'hermes' });
    expect(stderr).toContain('actor_rollout_ref.rollout.multi_turn.format=qwen read as hermes');
  });
});
