import { describe, it, expect } from 'vitest';
import { loadConfig, composeConfig, formatHelp, batchSizes, usesCritic, ConfigError } from '../../ppo/config.ts';
import { planStep } from '../../ppo/step-plan.ts';

/** The problems loadConfig reports, or [] when it accepts the input. */
function problemsOf(options: Parameters<typeof loadConfig>[0]): string[] {
  try {
    loadConfig(options);
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems;
  }
}

function expectProblem(overrides: string[], ...fragments: string[]): void {
  const problems = problemsOf({ overrides });
  expect(problems, `overrides ${overrides.join(' ')}`).toHaveLength(1);
  for (const fragment of fragments) expect(problems[0]).toContain(fragment);
}

describe('config defaults', () => {
  const config = loadConfig();

  it("has verl's defaults", () => {
    expect(config.data.train_batch_size).toBe(1024);
    expect(config.data.max_prompt_length).toBe(512);
    expect(config.data.truncation).toBe('error');
    expect(config.actor_rollout_ref.actor.ppo_mini_batch_size).toBe(256);
    expect(config.actor_rollout_ref.actor.clip_ratio).toBe(0.2);
    expect(config.actor_rollout_ref.actor.clip_ratio_c).toBe(3);
    expect(config.actor_rollout_ref.actor.loss_agg_mode).toBe('token-mean');
    expect(config.actor_rollout_ref.actor.kl_loss_type).toBe('low_var_kl');
    expect(config.actor_rollout_ref.actor.optim.lr).toBe(1e-6);
    expect(config.actor_rollout_ref.rollout.val_kwargs).toEqual({
      n: 1,
      temperature: 0,
      top_k: -1,
      top_p: 1,
      do_sample: false,
    });
    expect(config.critic.optim.lr).toBe(1e-5);
    expect(config.critic.cliprange_value).toBe(0.5);
    expect(config.custom_reward_function).toEqual({ path: null, name: 'compute_score', timeout: 300 });
    expect(config.algorithm).toEqual({
      gamma: 1,
      lam: 1,
      adv_estimator: 'gae',
      norm_adv_by_std_in_grpo: true,
      gdpo_reward_keys: null,
      gdpo_reward_weights: null,
      use_kl_in_reward: false,
      kl_penalty: 'kl',
      kl_ctrl: { type: 'fixed', kl_coef: 0.001, horizon: 10000, target_kl: 0.1 },
      use_pf_ppo: false,
      pf_ppo: { reweight_method: 'pow', weight_pow: 2 },
      // verl 1dda039b: no metric until dynamic sampling is enabled with one.
      filter_groups: { enable: false, metric: null, max_num_gen_batches: 0 },
      reward_mask_ratio: 0,
      rollout_correction: {
        rollout_is: null,
        rollout_is_threshold: 2,
        rollout_is_batch_normalize: false,
        rollout_rs: null,
        rollout_rs_threshold: null,
        bypass_mode: false,
        loss_type: 'ppo_clip',
      },
    });
    // verl 614ffc04c (in 1dda039b): old log-probs are recomputed by the training forward unless this is false.
    expect(config.actor_rollout_ref.rollout.calculate_log_probs).toBe(true);
    expect(config.trainer.resume_mode).toBe('auto');
    expect(config.trainer.total_epochs).toBe(30);
    expect(config.critic.freeze).toBe(false);
  });

  it("resolves verl's interpolated defaults", () => {
    expect(config.critic.ppo_mini_batch_size).toBe(256);
    expect(config.critic.ppo_epochs).toBe(1);
    expect(config.critic.loss_agg_mode).toBe('token-mean');
    expect(config.trainer.default_local_dir).toBe('checkpoints/verl_examples/gsm8k');
  });

  it('derives batch sizes in sequences', () => {
    const c = loadConfig({
      overrides: [
        'data.train_batch_size=8',
        'actor_rollout_ref.rollout.n=3',
        'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6',
      ],
    });
    expect(batchSizes(c)).toEqual({
      sequences: 24,
      actorMiniBatch: 12,
      actorMicroBatch: 6,
      criticMiniBatch: 12,
      criticMicroBatch: 12,
    });
    expect(usesCritic(c)).toBe(true);
  });

  it('formats every key with its default and meaning for --help', () => {
    const help = formatHelp();
    expect(help).toContain('actor_rollout_ref.actor:');
    expect(help).toMatch(/ {2}ppo_mini_batch_size = 256\n {6}Prompts per optimizer step/);
    expect(help).toContain('ppo_mini_batch_size = ${actor_rollout_ref.actor.ppo_mini_batch_size}');
    expect(help).toContain('adv_estimator = gae');
    expect(help).toContain('reward_mask_ratio = 0');
    expect(help).toContain('freeze = false');
  });
});

describe('config precedence', () => {
  const yamlText = [
    'data:',
    '  train_batch_size: 16',
    '  train_files: [a.parquet, b.jsonl]',
    'actor_rollout_ref:',
    '  actor:',
    '    ppo_mini_batch_size: 8',
    '    optim: {lr: 1e-5}',
    'trainer:',
    '  project_name: demo',
    '  experiment_name: "0"',
  ].join('\n');

  it('YAML overrides defaults, key=value overrides YAML, interpolations follow', () => {
    const c = loadConfig({
      layers: [{ text: yamlText, source: 'run.yaml' }],
      overrides: ['actor_rollout_ref.actor.ppo_mini_batch_size=4', 'trainer.experiment_name=run1'],
    });
    expect(c.data.train_batch_size).toBe(16);
    expect(c.data.train_files).toEqual(['a.parquet', 'b.jsonl']);
    expect(c.actor_rollout_ref.actor.optim.lr).toBe(1e-5);
    expect(c.actor_rollout_ref.actor.optim.weight_decay).toBe(0.01);
    expect(c.actor_rollout_ref.actor.ppo_mini_batch_size).toBe(4);
    expect(c.critic.ppo_mini_batch_size).toBe(4);
    expect(c.trainer.default_local_dir).toBe('checkpoints/demo/run1');
  });

  it('parses override values like Hydra', () => {
    const c = loadConfig({
      overrides: [
        'actor_rollout_ref.actor.optim.lr=3e-6',
        'data.shuffle=false',
        'data.val_batch_size=null',
        'trainer.logger=[console]',
        'trainer.experiment_name=42',
        'custom_reward_function.path=~/rewards/my reward.ts',
        '+algorithm.gamma=0.99',
        'data.train_files="x=y.parquet"',
        'critic.freeze=true',
        'algorithm.kl_penalty=low_var_kl+',
      ],
    });
    expect(c.actor_rollout_ref.actor.optim.lr).toBe(3e-6);
    expect(c.data.shuffle).toBe(false);
    expect(c.data.val_batch_size).toBeNull();
    expect(c.trainer.logger).toEqual(['console']);
    expect(c.trainer.experiment_name).toBe('42');
    expect(c.custom_reward_function.path).toBe('~/rewards/my reward.ts');
    expect(c.algorithm.gamma).toBe(0.99);
    expect(c.data.train_files).toBe('x=y.parquet');
    expect(c.critic.freeze).toBe(true);
  });

  it('accepts a group assignment as a mapping', () => {
    const c = loadConfig({ overrides: ['algorithm.kl_ctrl={type: adaptive, kl_coef: 0.2}'] });
    expect(c.algorithm.kl_ctrl).toEqual({ type: 'adaptive', kl_coef: 0.2, horizon: 10000, target_kl: 0.1 });
  });

  it('an explicit value replaces an interpolated default', () => {
    const c = loadConfig({ overrides: ['critic.ppo_epochs=3', 'actor_rollout_ref.actor.ppo_epochs=2'] });
    expect(c.critic.ppo_epochs).toBe(3);
    expect(c.actor_rollout_ref.actor.ppo_epochs).toBe(2);
  });

  it('an empty YAML file changes nothing', () => {
    expect(loadConfig({ layers: [{ text: '# nothing\n', source: 'empty.yaml' }] })).toEqual(loadConfig());
  });
});

describe('config errors', () => {
  it('unknown keys suggest the closest key', () => {
    expectProblem(
      ['actor_rollout_ref.actor.clip_ration=0.3'],
      'unknown key actor_rollout_ref.actor.clip_ration',
      'did you mean actor_rollout_ref.actor.clip_ratio?',
    );
    expectProblem(['trainer.ppo_epochs=2'], 'did you mean actor_rollout_ref.actor.ppo_epochs or critic.ppo_epochs?');
    expectProblem(['algorithm.kl_ctrl.kl_coeff=0.1'], 'did you mean algorithm.kl_ctrl.kl_coef?');
  });

  it('unknown keys in the YAML file name the file', () => {
    const problems = problemsOf({ layers: [{ text: 'trainer:\n  total_epoch: 3\n', source: 'run.yaml' }] });
    expect(problems).toEqual(['unknown key trainer.total_epoch (run.yaml) — did you mean trainer.total_epochs?']);
  });

  it('wrong types name the key, the value and the expected type', () => {
    expectProblem(['trainer.total_epochs=abc'], 'trainer.total_epochs', '"abc"', 'expected an integer');
    expectProblem(['trainer.total_epochs=2.5'], 'expected an integer, got 2.5');
    expectProblem(['data.shuffle=yes'], 'data.shuffle', 'expected true or false, got "yes"');
    expectProblem(
      ['actor_rollout_ref.actor.optim.lr=null'],
      'actor_rollout_ref.actor.optim.lr',
      'expected a number, got null',
    );
    expectProblem(['trainer.logger=3'], 'trainer.logger', 'expected a list of strings');
    expectProblem(['trainer.project_name=[a,b]'], 'expected a string, got ["a", "b"]');
    expectProblem(['trainer=3'], 'trainer (command line) is a group of keys');
    expectProblem(['data.max_prompt_length=0'], 'data.max_prompt_length (command line) must be positive, got 0');
  });

  it('unknown choices suggest the closest one', () => {
    expectProblem(['algorithm.adv_estimator=grop'], 'algorithm.adv_estimator', 'did you mean grpo?');
    expectProblem(['actor_rollout_ref.actor.loss_agg_mode=token_mean'], 'did you mean token-mean?');
    expectProblem(['algorithm.kl_penalty=k4'], 'algorithm.kl_penalty', 'unsupported estimator "k4"');
    expectProblem(['actor_rollout_ref.actor.kl_loss_type=full'], 'actor_rollout_ref.actor.kl_loss_type');
    expectProblem(['trainer.logger=[console,tensorbord]'], 'unknown value "tensorbord"', 'did you mean tensorboard?');
    expectProblem(['algorithm.adv_estimator=vtrace'], 'unknown value "vtrace" (expected one of');
    expectProblem(
      ['actor_rollout_ref.model.lora_rank=8', 'actor_rollout_ref.model.target_modules=[q_proj,v_prj]'],
      'actor_rollout_ref.model.target_modules (command line): unknown value "v_prj" — did you mean v_proj?',
    );
    expectProblem(
      [
        'actor_rollout_ref.model.lora_rank=8',
        'actor_rollout_ref.model.exclude_modules=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]',
      ],
      'actor_rollout_ref.model.target_modules: no module left to adapt',
    );
    expectProblem(['critic.model.lora_rank=8', 'critic.model.lora_adapter_path=/x'], 'critic.model.lora_adapter_path');
    expectProblem(['critic.model.lora_rank=8', 'critic.freeze=true'], 'critic.model.lora_rank=8', 'critic.freeze=true');
    expectProblem(['trainer.resume_mode=resume'], 'trainer.resume_mode', 'expected one of auto, disable, resume_path');
    expectProblem(['actor_rollout_ref.actor.policy_loss.loss_mode=gspoo'], 'did you mean gspo?');
  });

  it("PF-PPO: a reweight_method outside verl's three is one line naming the key and the choices", () => {
    expectProblem(
      ['algorithm.use_pf_ppo=true', 'algorithm.pf_ppo.reweight_method=maxmin'],
      'algorithm.pf_ppo.reweight_method (command line): unknown value "maxmin" — did you mean max_min? (expected one ' +
        'of pow, max_min, max_random)',
    );
    expectProblem(
      ['algorithm.pf_ppo.reweight_method=softmax'],
      'algorithm.pf_ppo.reweight_method',
      '(expected one of pow, max_min, max_random)',
    );
  });

  for (const estimator of ['optimal_token_baseline', 'tir_optimal_token_baseline']) {
    it(
      `${estimator} needs calculate_sum_pi_squared (verl asserts it) and the old-log-prob forward bypass mode ` +
        `skips`,
      () => {
        const otb = [`algorithm.adv_estimator=${estimator}`, 'actor_rollout_ref.rollout.n=2'];
        expectProblem(
          otb,
          `algorithm.adv_estimator=${estimator} needs Σπ²`,
          'set actor_rollout_ref.actor.calculate_sum_pi_squared=true',
        );
        const withSumPiSquared = [...otb, 'actor_rollout_ref.actor.calculate_sum_pi_squared=true'];
        expect(problemsOf({ overrides: withSumPiSquared })).toEqual([]);
        expect(
          problemsOf({ overrides: [...withSumPiSquared, 'actor_rollout_ref.actor.sum_pi_squared_checkpointing=true'] }),
        ).toEqual([]);
        expectProblem(
          [
            ...withSumPiSquared,
            'actor_rollout_ref.rollout.calculate_log_probs=true',
            'algorithm.rollout_correction.bypass_mode=true',
          ],
          `algorithm.adv_estimator=${estimator} reads Σπ²`,
          'algorithm.rollout_correction.bypass_mode=true skips',
        );
      },
    );
  }

  it('mini-batches must divide the batch and micro-batches the mini-batch', () => {
    expectProblem(
      ['data.train_batch_size=12', 'actor_rollout_ref.actor.ppo_mini_batch_size=8'],
      'actor_rollout_ref.actor.ppo_mini_batch_size=8',
      'must divide data.train_batch_size × rollout.n = 12',
      'try actor_rollout_ref.actor.ppo_mini_batch_size=6',
    );
    expectProblem(['data.train_batch_size=8', 'actor_rollout_ref.actor.ppo_mini_batch_size=16'], 'must divide');
    expectProblem(
      [
        'data.train_batch_size=8',
        'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        'actor_rollout_ref.rollout.n=2',
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3',
      ],
      'ppo_micro_batch_size_per_gpu=3 must divide the mini-batch of 8 sequences',
      'try actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2',
    );
    expectProblem(
      ['data.train_batch_size=8', 'actor_rollout_ref.actor.ppo_mini_batch_size=4', 'critic.ppo_mini_batch_size=3'],
      'critic.ppo_mini_batch_size=3',
    );
    expectProblem(
      [
        'data.train_batch_size=8',
        'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        'critic.ppo_micro_batch_size_per_gpu=5',
      ],
      'critic.ppo_micro_batch_size_per_gpu=5',
    );
    expectProblem(
      ['actor_rollout_ref.actor.ppo_micro_batch_size=4', 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4'],
      'mutually exclusive',
    );
  });

  it('clip ratios and other ranges are checked', () => {
    expectProblem(
      ['actor_rollout_ref.actor.clip_ratio=1.5'],
      'actor_rollout_ref.actor.clip_ratio',
      'must be in (0, 1)',
    );
    expectProblem(['actor_rollout_ref.actor.clip_ratio_low=0'], 'clip_ratio_low', 'must be positive');
    expectProblem(['actor_rollout_ref.actor.clip_ratio_high=-0.1'], 'clip_ratio_high', 'must be positive');
    expectProblem(['actor_rollout_ref.actor.clip_ratio_c=1'], 'clip_ratio_c', 'must be greater than 1');
    expectProblem(['critic.cliprange_value=0'], 'critic.cliprange_value');
    expectProblem(['algorithm.gamma=1.1'], 'algorithm.gamma', 'in [0, 1]');
    expectProblem(['actor_rollout_ref.actor.optim.betas=[0.9,1.0]'], 'betas must be two numbers in [0, 1)');
  });

  it('reward_mask_ratio must lie in [0, 1]', () => {
    expectProblem(['algorithm.reward_mask_ratio=1.5'], 'algorithm.reward_mask_ratio', 'must be in [0, 1], got 1.5');
    expectProblem(['algorithm.reward_mask_ratio=-0.1'], 'algorithm.reward_mask_ratio');
    expect(loadConfig({ overrides: ['algorithm.reward_mask_ratio=1'] }).algorithm.reward_mask_ratio).toBe(1);
  });

  it('GAE needs a critic; critic-free estimators accept a critic path but no critic options', () => {
    expectProblem(
      ['actor_rollout_ref.model.path=/models/qwen', 'critic.model.path=null'],
      'adv_estimator=gae trains a critic',
      'critic.model.path',
    );
    const grpo = ['algorithm.adv_estimator=grpo', 'actor_rollout_ref.rollout.n=4'];
    expect(problemsOf({ overrides: [...grpo, 'actor_rollout_ref.model.path=/m', 'critic.model.path=/c'] })).toEqual([]);
    expect(problemsOf({ overrides: [...grpo, 'actor_rollout_ref.model.path=/m', 'critic.model.path=null'] })).toEqual(
      [],
    );
    expect(usesCritic(loadConfig({ overrides: grpo }))).toBe(false);
    expectProblem(
      [...grpo, 'critic.freeze=true'],
      'critic.freeze=true but algorithm.adv_estimator=grpo uses no critic',
    );
    expectProblem(
      [...grpo, 'trainer.critic_warmup=2'],
      'trainer.critic_warmup=2 but algorithm.adv_estimator=grpo uses no critic',
    );
    expectProblem(['critic.freeze=true', 'trainer.critic_warmup=2'], 'nothing would train');
  });

  it('critic-free estimators skip the critic batch checks', () => {
    const overrides = [
      'algorithm.adv_estimator=rloo',
      'actor_rollout_ref.rollout.n=2',
      'data.train_batch_size=8',
      'actor_rollout_ref.actor.ppo_mini_batch_size=4',
      'critic.ppo_mini_batch_size=3',
    ];
    expect(problemsOf({ overrides })).toEqual([]);
  });

  it(
    'pass@k needs several samples per prompt (GRPO runs a group of one, as verl); greedy sampling cannot give ' +
      'them',
    () => {
      expect(problemsOf({ overrides: ['algorithm.adv_estimator=grpo'] })).toEqual([]);
      expectProblem(
        ['algorithm.adv_estimator=grpo_passk'],
        'rollout.n=1',
        'set actor_rollout_ref.rollout.n to 2 or more',
      );
      expectProblem(
        ['actor_rollout_ref.rollout.n=4', 'actor_rollout_ref.rollout.do_sample=false'],
        'identical responses',
      );
      expectProblem(['actor_rollout_ref.rollout.temperature=0'], 'needs a positive temperature');
      expectProblem(
        ['actor_rollout_ref.rollout.val_kwargs.n=2'],
        'actor_rollout_ref.rollout.val_kwargs.n=2',
        'identical responses',
      );
    },
  );

  it('reward model, custom reward and resume combinations', () => {
    expectProblem(['reward_model.enable=true'], 'reward_model.model.path is null');
    expectProblem(
      ['reward_model.enable=true', 'reward_model.model.path=/rm', 'custom_reward_function.path=r.ts'],
      'would be ignored',
    );
    expectProblem(['trainer.resume_mode=resume_path'], 'needs trainer.resume_from_path');
    expectProblem(['trainer.resume_mode=resume_path', 'trainer.resume_from_path=ckpt/latest'], 'global_step_N');
    expectProblem(['trainer.resume_from_path=ckpt/global_step_4'], 'set trainer.resume_mode=resume_path');
    expect(
      problemsOf({ overrides: ['trainer.resume_mode=resume_path', 'trainer.resume_from_path=ckpt/global_step_4'] }),
    ).toEqual([]);
  });

  it('search keys: a retriever is needed, one at a time, and only with do_search', () => {
    expectProblem(
      ['do_search=true', 'data.train_files=t.jsonl'],
      'do_search=true needs a retriever',
      'retriever.url',
      'retriever.corpus_path',
    );
    expectProblem(
      ['do_search=true', 'retriever.url=http://127.0.0.1:8000/retrieve', 'retriever.corpus_path=c.jsonl'],
      'both set',
    );
    expectProblem(
      ['do_search=false', 'retriever.url=http://127.0.0.1:8000/retrieve'],
      'retriever.url is set but do_search=false',
    );
    // Unset, do_search follows the retriever, as Search-R1's scripts (which never set it) expect.
    expect(loadConfig({ overrides: ['retriever.url=http://127.0.0.1:8000/retrieve'] }).do_search).toBe(true);
    expect(loadConfig().do_search).toBe(false);
    expectProblem(['do_search=false', 'data.builtin_task=search_qa'], 'set do_search=true');
    expectProblem(['do_search=true', 'max_turns=0'], 'max_turns (command line) must be positive');
    expectProblem(
      ['do_search=true', 'data.builtin_task=search_qa', 'retriever.topk=1.5'],
      'retriever.topk',
      'expected an integer',
    );
    expectProblem(['data.builtin_task=search'], 'data.builtin_task', 'did you mean search_qa?');
    expect(problemsOf({ overrides: ['do_search=true', 'data.builtin_task=search_qa'] })).toEqual([]);
    expect(
      problemsOf({
        overrides: ['do_search=true', 'data.train_files=t.jsonl', 'retriever.url=http://127.0.0.1:8000/retrieve'],
      }),
    ).toEqual([]);
  });

  it('interpolations must name known keys and must not cycle', () => {
    expectProblem(
      ['trainer.experiment_name=${trainer.project}'],
      'interpolation ${trainer.project} names an unknown key',
      'did you mean trainer.project_name?',
    );
    const problems = problemsOf({
      overrides: ['trainer.project_name=${trainer.experiment_name}', 'trainer.experiment_name=${trainer.project_name}'],
    });
    expect(problems.some((p) => p.includes('interpolation cycle'))).toBe(true);
  });

  it('malformed input is a clear error', () => {
    expect(problemsOf({ overrides: ['trainer.total_epochs'] })).toEqual([
      'override "trainer.total_epochs" is not key.sub=value',
    ]);
    expect(problemsOf({ overrides: ['data.train_files=[a,b'] })[0]).toContain('cannot parse the value of override');
    expect(problemsOf({ overrides: ['~trainer.sed'] })).toEqual(['~trainer.sed (command line): no such key to delete']);
    expect(problemsOf({ layers: [{ text: '- a\n- b\n', source: 'run.yaml' }] })[0]).toContain(
      'run.yaml: expected a mapping',
    );
    expect(problemsOf({ layers: [{ text: 'a: [1\n', source: 'run.yaml' }] })[0]).toContain('run.yaml: not valid YAML');
  });

  it('reports every problem at once', () => {
    const problems = problemsOf({ overrides: ['trainer.total_epochs=0', 'data.shuffle=2', 'nope=1'] });
    expect(problems).toHaveLength(3);
  });
});

describe('PF-PPO keys (algorithm.use_pf_ppo, algorithm.pf_ppo.*)', () => {
  it('are accepted with GAE and give the step its resampling plan, without a note', () => {
    const { config, notes } = composeConfig({
      overrides: [
        'algorithm.use_pf_ppo=true',
        'algorithm.pf_ppo.reweight_method=max_random',
        'algorithm.pf_ppo.weight_pow=1.5',
      ],
    });
    expect(config.algorithm.use_pf_ppo).toBe(true);
    expect(config.algorithm.pf_ppo).toEqual({ reweight_method: 'max_random', weight_pow: 1.5 });
    expect(planStep(config).pfPpo).toEqual({ reweightMethod: 'max_random', weightPow: 1.5 });
    expect(notes).toEqual([]);
    expect(planStep(loadConfig()).pfPpo).toBeNull();
  });

  it('do nothing with another estimator, as in verl, and a note says so', () => {
    const { config, notes } = composeConfig({
      overrides: ['algorithm.adv_estimator=grpo', 'actor_rollout_ref.rollout.n=2', 'algorithm.use_pf_ppo=true'],
    });
    expect(planStep(config).pfPpo).toBeNull();
    expect(notes).toEqual([
      'algorithm.use_pf_ppo=true does nothing with algorithm.adv_estimator=grpo: verl resamples the batch for PF-PPO ' +
        "only after GAE's advantages, so this run trains on the batch as generated",
    ]);
  });
});

describe("verl 1dda039b's policy losses and loss keys", () => {
  const actor = 'actor_rollout_ref.actor';
  it('dro needs policy_loss.dro_beta > 0, in verl words; the step plan carries it', () => {
    expect(() => planStep(loadConfig({ overrides: [`${actor}.policy_loss.loss_mode=dro`] }))).toThrow(
      'policy_loss.dro_beta must be a positive value when using DRO',
    );
    const plan = planStep(
      loadConfig({ overrides: [`${actor}.policy_loss.loss_mode=dro`, `${actor}.policy_loss.dro_beta=0.05`] }),
    );
    expect(plan.actor.policyLoss).toMatchObject({ lossMode: 'dro', droBeta: 0.05 });
  });

  it('takes dppo_tv, dppo_kl, token-sum and loss_scale_factor', () => {
    const plan = planStep(
      loadConfig({
        overrides: [
          `${actor}.policy_loss.loss_mode=dppo_kl`,
          `${actor}.loss_agg_mode=token-sum`,
          `${actor}.loss_scale_factor=512`,
          'critic.loss_scale_factor=256',
        ],
      }),
    );
    expect(plan.actor).toMatchObject({ lossAggMode: 'token-sum', lossScaleFactor: 512 });
    expect(plan.actor.policyLoss.lossMode).toBe('dppo_kl');
    expect(plan.critic.lossScaleFactor).toBe(256);
    expect(formatHelp()).toContain('dro_beta');
  });

  it('takes IcePop\'s "LOWER_UPPER" rollout_is_threshold, and refuses bounds out of order', () => {
    const rc = 'algorithm.rollout_correction';
    const is = [`${rc}.rollout_is=token`, 'actor_rollout_ref.rollout.calculate_log_probs=true'];
    expect(planStep(loadConfig({ overrides: [...is, `${rc}.rollout_is_threshold=0.5_2.0`] })).rolloutIs).toEqual({
      level: 'token',
      threshold: '0.5_2.0',
      batchNormalize: false,
    });
    expect(planStep(loadConfig({ overrides: [...is, `${rc}.rollout_is_threshold=1.5`] })).rolloutIs?.threshold).toBe(
      1.5,
    );
    expect(() => planStep(loadConfig({ overrides: [...is, `${rc}.rollout_is_threshold=2.0_0.5`] }))).toThrow(
      /lower bound must be <= upper bound/,
    );
  });
});
