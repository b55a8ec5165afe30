// Checks across keys of a resolved configuration (batch sizes that must divide, options that need or exclude
// each other), and the batch sizes the trainer schedules with. Each problem says what to set instead.
import { parseKlEstimator } from '../../kernels/ppo/ppo-vocabulary.ts';
import { SUM_PI_SQUARED_ESTIMATORS, type PpoConfig } from './schema.ts';
import { estimatorUsesCritic } from './advantage-estimator-table.ts';
import { betasProblem, emptyRunDirectoryProblem, show } from './errors.ts';
import { parseRolloutRs } from './rollout-rs-spec.ts';
import type { QuantizeKeys } from './model-dtype.ts';
import { resolveTargetModules, type LoraSettings } from '../../models/lora.ts';

interface MiniBatchKeys {
  ppo_mini_batch_size: number;
  ppo_micro_batch_size: number | null;
  ppo_micro_batch_size_per_gpu: number | null;
}

/**
 * Effective micro-batch of an actor or critic section: the _per_gpu key, its deprecated alias, or the whole mini-batch.
 */
function microBatchSize(section: MiniBatchKeys, miniBatchSequences: number): number {
  return section.ppo_micro_batch_size_per_gpu ?? section.ppo_micro_batch_size ?? miniBatchSequences;
}

/** Sequence counts the trainer schedules with: rollout batch, and mini/micro batches of actor and critic. */
export interface BatchSizes {
  /** data.train_batch_size × rollout.n */
  sequences: number;
  actorMiniBatch: number;
  actorMicroBatch: number;
  criticMiniBatch: number;
  criticMicroBatch: number;
}

export function batchSizes(config: PpoConfig): BatchSizes {
  const n = config.actor_rollout_ref.rollout.n;
  const actorMiniBatch = config.actor_rollout_ref.actor.ppo_mini_batch_size * n;
  const criticMiniBatch = config.critic.ppo_mini_batch_size * n;
  return {
    sequences: config.data.train_batch_size * n,
    actorMiniBatch,
    actorMicroBatch: microBatchSize(config.actor_rollout_ref.actor, actorMiniBatch),
    criticMiniBatch,
    criticMicroBatch: microBatchSize(config.critic, criticMiniBatch),
  };
}

/** The actor's LoRA settings from its keys (verl: lora_rank > 0), null without LoRA. A lora_adapter_path's own
 *  adapter_config.json replaces them when the adapter loads. */
export function actorLoraSettings(config: PpoConfig): LoraSettings | null {
  const m = config.actor_rollout_ref.model;
  if (m.lora_rank === 0) return null;
  return {
    rank: m.lora_rank,
    alpha: m.lora_alpha,
    useRslora: false,
    targetModules: resolveTargetModules(m.target_modules, m.exclude_modules, 'actor_rollout_ref.model.target_modules'),
  };
}

/** Generation on rollout servers: server_urls given (checkCombinations refuses them with name=hf). */
export function usesRolloutServers(config: PpoConfig): boolean {
  return config.actor_rollout_ref.rollout.server_urls.length > 0;
}

/** Critic LoRA (critic.model.lora_rank > 0): the adapters' settings; null when the critic trains every weight. */
export function criticLoraSettings(config: PpoConfig): LoraSettings | null {
  const m = config.critic.model;
  if (m.lora_rank === 0) return null;
  return {
    rank: m.lora_rank,
    alpha: m.lora_alpha,
    useRslora: false,
    targetModules: resolveTargetModules(m.target_modules, m.exclude_modules, 'critic.model.target_modules'),
  };
}

/** Whether this configuration trains with a critic (verl: only GAE uses one). */
export function usesCritic(config: PpoConfig): boolean {
  return estimatorUsesCritic(config.algorithm.adv_estimator);
}

/** Whether the step resamples its batch for PF-PPO: verl's compute_advantage reads use_pf_ppo in its GAE branch
 *  only, so with any other estimator the key does nothing (the loader prints a note saying so). */
export function usesPfPpo(config: PpoConfig): boolean {
  return config.algorithm.use_pf_ppo && config.algorithm.adv_estimator === 'gae';
}

/** The largest divisor of `total` not above `wanted` (a suggestion for a batch size that must divide). */
function divisorBelow(total: number, wanted: number): number {
  for (let d = Math.min(wanted, total); d > 1; d--) if (total % d === 0) return d;
  return 1;
}

function checkBatchSizes(config: PpoConfig, problems: string[]): void {
  const { train_batch_size: prompts } = config.data;
  const n = config.actor_rollout_ref.rollout.n;
  const sections: [string, MiniBatchKeys][] = [['actor_rollout_ref.actor', config.actor_rollout_ref.actor]];
  if (usesCritic(config)) sections.push(['critic', config.critic]);
  for (const [name, section] of sections) {
    const mini = section.ppo_mini_batch_size;
    if (section.ppo_micro_batch_size !== null && section.ppo_micro_batch_size_per_gpu !== null) {
      problems.push(
        `${name}.ppo_micro_batch_size and ${name}.ppo_micro_batch_size_per_gpu are mutually exclusive: remove ` +
          `${name}.ppo_micro_batch_size (deprecated)`,
      );
    }
    if (prompts % mini !== 0) {
      // The critic's mini-batch follows the actor's by default: one message for one mistake.
      const reportedForActor = name === 'critic' && mini === config.actor_rollout_ref.actor.ppo_mini_batch_size;
      if (!reportedForActor)
        problems.push(
          `${name}.ppo_mini_batch_size=${mini} (× rollout.n=${n} = ${mini * n} sequences) must divide ` +
            `data.train_batch_size × rollout.n = ${prompts * n}` +
            ` — try ${name}.ppo_mini_batch_size=${divisorBelow(prompts, mini)}`,
        );
      continue;
    }
    const micro = microBatchSize(section, mini * n);
    if ((mini * n) % micro !== 0) {
      problems.push(
        `${name}.ppo_micro_batch_size_per_gpu=${micro} must divide the mini-batch of ${mini * n} sequences ` +
          `(ppo_mini_batch_size ${mini} × rollout.n ${n})` +
          ` — try ${name}.ppo_micro_batch_size_per_gpu=${divisorBelow(mini * n, micro)}`,
      );
    }
  }
}

function checkKlEstimator(path: string, name: string, problems: string[]): void {
  try {
    parseKlEstimator(name);
  } catch (err) {
    problems.push(`${path}: ${(err as Error).message}`);
  }
}

/** Defaults that depend on other keys (do_search: on when the run has something to search; data.seed: trainer.seed). */
export function deriveDefaults(config: PpoConfig): void {
  const { retriever, data } = config;
  config.data.seed ??= config.trainer.seed;
  const { rollout } = config.actor_rollout_ref;
  if (rollout.agent.default_agent_loop === 'tool_agent') rollout.multi_turn.enable = true;
  // verl's Search-R1 example config writes format: qwen, which Qwen's chat templates write as hermes tool calls.
  if (rollout.multi_turn.format === 'qwen') rollout.multi_turn.format = 'hermes';
  config.do_search ??=
    retriever.url !== null ||
    retriever.corpus_path !== null ||
    (data.train_files === null && data.builtin_task === 'search_qa');
}

/** The quantization keys of the LoRA base (actor_rollout_ref.model), the reference and the reward model: one width
 *  each, use_bnb_nested_quant only with load_in_4bit, and the reference's and reward model's only for a model the
 *  run has (the LoRA base's need LoRA: checked in checkCombinations). */
function checkQuantization(config: PpoConfig, problems: string[]): void {
  const { ref, actor, model } = config.actor_rollout_ref;
  const hasReference = config.algorithm.use_kl_in_reward || actor.use_kl_loss;
  const lora = model.lora_rank > 0 || model.lora_adapter_path !== null;
  const models: [string, QuantizeKeys, string | null][] = [
    ['actor_rollout_ref.model', model, null],
    [
      'actor_rollout_ref.ref',
      ref,
      lora
        ? "under LoRA the reference is the actor's frozen base — set actor_rollout_ref.model.load_in_4bit / " +
          'load_in_8bit to quantize it'
        : hasReference
          ? null
          : 'there is no reference without a KL term (algorithm.use_kl_in_reward and actor.use_kl_loss are false)',
    ],
    [
      'reward_model.model',
      config.reward_model.model,
      config.reward_model.enable ? null : 'reward_model.enable is false, so there is no reward model',
    ],
  ];
  for (const [path, keys, absent] of models) {
    if (keys.load_in_4bit && keys.load_in_8bit)
      problems.push(
        `${path}.load_in_8bit=true and load_in_4bit=true: the model is quantized one way — set one of them to false`,
      );
    if (keys.use_bnb_nested_quant && !keys.load_in_4bit)
      problems.push(
        `${path}.use_bnb_nested_quant=true double-quantizes the NF4 block scales, but load_in_4bit is false — set ` +
          `${path}.load_in_4bit=true or remove use_bnb_nested_quant`,
      );
    const key = keys.load_in_4bit ? 'load_in_4bit' : keys.load_in_8bit ? 'load_in_8bit' : null;
    if (key && absent) problems.push(`${path}.${key}=true quantizes nothing: ${absent}, or remove ${path}.${key}`);
  }
}

export function checkCombinations(config: PpoConfig, problems: string[]): void {
  const { actor, rollout, model } = config.actor_rollout_ref;
  const { algorithm, critic, trainer } = config;
  checkBatchSizes(config, problems);
  checkKlEstimator('algorithm.kl_penalty', algorithm.kl_penalty, problems);
  checkKlEstimator('actor_rollout_ref.actor.kl_loss_type', actor.kl_loss_type, problems);
  checkRolloutCorrection(algorithm.rollout_correction, problems);
  try {
    actorLoraSettings(config);
  } catch (err) {
    problems.push((err as Error).message);
  }
  for (const [path, optim] of [
    ['actor_rollout_ref.actor.optim', actor.optim],
    ['critic.optim', critic.optim],
  ] as const) {
    const impl = optim.optimizer === 'AdamW8bit' ? 'bitsandbytes.optim' : 'torch.optim';
    if (optim.optimizer_impl !== impl)
      problems.push(
        `${path}.optimizer_impl=${optim.optimizer_impl} has no ${optim.optimizer} here (verl imports ` +
          `${optim.optimizer_impl}.${optim.optimizer}) — set ${path}.optimizer_impl=${impl}`,
      );
  }
  for (const key of ['load_in_4bit', 'load_in_8bit'] as const)
    if (model[key] && model.lora_rank === 0 && model.lora_adapter_path === null)
      problems.push(
        `actor_rollout_ref.model.${key}=true quantizes a frozen LoRA base, but LoRA is off — set ` +
          'actor_rollout_ref.model.lora_rank (e.g. 16) or lora_adapter_path; a fully trained actor keeps float32 weights',
      );
  checkQuantization(config, problems);
  if (model.lora_save_merged && model.lora_rank === 0 && model.lora_adapter_path === null) {
    problems.push(
      'actor_rollout_ref.model.lora_save_merged=true but LoRA is off — set actor_rollout_ref.model.lora_rank (e.g. ' +
        '8) or lora_adapter_path, or remove lora_save_merged',
    );
  }

  const estimator = algorithm.adv_estimator;
  if (usesCritic(config)) {
    if (critic.model.path === null && model.path !== null) {
      problems.push(
        `algorithm.adv_estimator=gae trains a critic, but critic.model.path is null — set critic.model.path (e.g. to ` +
          `${model.path}) or use a critic-free estimator such as algorithm.adv_estimator=grpo`,
      );
    }
    if (critic.freeze && trainer.critic_warmup > 0) {
      problems.push(
        `trainer.critic_warmup=${trainer.critic_warmup} updates only the critic, but critic.freeze=true: nothing ` +
          `would train — set trainer.critic_warmup=0 or critic.freeze=false`,
      );
    }
    if (critic.freeze && critic.model.lora_rank > 0)
      problems.push(
        `critic.model.lora_rank=${critic.model.lora_rank} trains critic adapters, but critic.freeze=true trains ` +
          'nothing — set critic.model.lora_rank=0 or critic.freeze=false',
      );
  } else {
    if (critic.freeze)
      problems.push(
        `critic.freeze=true but algorithm.adv_estimator=${estimator} uses no critic — remove critic.freeze or use ` +
          `algorithm.adv_estimator=gae`,
      );
    if (trainer.critic_warmup > 0)
      problems.push(
        `trainer.critic_warmup=${trainer.critic_warmup} but algorithm.adv_estimator=${estimator} uses no critic — ` +
          `set trainer.critic_warmup=0`,
      );
  }
  // verl's compute_advantage asserts that sum_pi_squared is in the batch: only the old-log-prob forward with
  // actor.calculate_sum_pi_squared gives it, and bypass mode skips that forward.
  if (SUM_PI_SQUARED_ESTIMATORS.includes(estimator)) {
    if (!actor.calculate_sum_pi_squared) {
      problems.push(
        `algorithm.adv_estimator=${estimator} needs Σπ² per response token (sum_pi_squared) — set ` +
          `actor_rollout_ref.actor.calculate_sum_pi_squared=true, as verl asks`,
      );
    } else if (algorithm.rollout_correction.bypass_mode) {
      problems.push(
        `algorithm.adv_estimator=${estimator} reads Σπ² from the old-log-prob forward, which ` +
          `algorithm.rollout_correction.bypass_mode=true skips (verl stops there too) — set bypass_mode=false or use ` +
          `another estimator`,
      );
    }
  }
  // verl runs the other group estimators with rollout.n=1 (a group of one: mean 0, standard deviation 1).
  if (estimator === 'grpo_passk' && rollout.n < 2) {
    problems.push(
      `algorithm.adv_estimator=grpo_passk compares the responses to one prompt, but ` +
        `actor_rollout_ref.rollout.n=${rollout.n} — set actor_rollout_ref.rollout.n to 2 or more (e.g. 4)`,
    );
  }

  for (const [path, sampling] of [
    ['actor_rollout_ref.rollout', rollout],
    ['actor_rollout_ref.rollout.val_kwargs', rollout.val_kwargs],
  ] as const) {
    if (!sampling.do_sample && sampling.n > 1) {
      problems.push(
        `${path}.n=${sampling.n} with ${path}.do_sample=false: greedy decoding gives ${sampling.n} identical ` +
          `responses — set ${path}.do_sample=true or ${path}.n=1`,
      );
    }
    if (sampling.do_sample && sampling.temperature === 0) {
      problems.push(
        `${path}.do_sample=true with ${path}.temperature=0: sampling needs a positive temperature — set ` +
          `${path}.do_sample=false for greedy decoding`,
      );
    }
  }

  if (rollout.ignore_eos && (rollout.multi_turn.enable || config.do_search)) {
    problems.push(
      'actor_rollout_ref.rollout.ignore_eos=true with a multi-turn rollout (multi_turn.enable or do_search): a turn ' +
        'ends at its EOS — set ignore_eos=false',
    );
  }

  if (config.reward_model.enable && config.reward_model.model.path === null) {
    problems.push(
      'reward_model.enable=true but reward_model.model.path is null — set it to a Hugging Face ' +
        '*ForSequenceClassification directory',
    );
  }
  const overlong = config.reward_model.reward_kwargs.overlong_buffer_cfg;
  if (overlong.enable) {
    if (config.reward_model.reward_manager !== 'dapo')
      problems.push(
        `reward_model.reward_kwargs.overlong_buffer_cfg.enable=true needs reward_model.reward_manager=dapo (got ` +
          `${config.reward_model.reward_manager})`,
      );
    const maxLength = config.reward_model.reward_kwargs.max_resp_len ?? config.data.max_response_length;
    if (overlong.len <= 0 || overlong.len > maxLength) {
      problems.push(
        `reward_model.reward_kwargs.overlong_buffer_cfg.len=${overlong.len} must be in [1, ${maxLength}] ` +
          `(reward_kwargs.max_resp_len, else data.max_response_length)`,
      );
    }
  }
  const filter = config.algorithm.filter_groups;
  if (
    config.data.gen_batch_size !== null &&
    config.data.gen_batch_size !== config.data.train_batch_size &&
    !filter.enable
  ) {
    problems.push(
      `data.gen_batch_size=${config.data.gen_batch_size} differs from ` +
        `data.train_batch_size=${config.data.train_batch_size} but algorithm.filter_groups.enable=false: only ` +
        `dynamic sampling generates batches of another size — set algorithm.filter_groups.enable=true or remove ` +
        `data.gen_batch_size`,
    );
  }
  if (filter.enable && filter.metric === null) {
    problems.push(
      'algorithm.filter_groups.enable=true but algorithm.filter_groups.metric is null (verl 1dda039b has no default) — ' +
        'set algorithm.filter_groups.metric to acc, score, seq_reward, seq_final_reward or a field your reward returns',
    );
  }
  if (filter.enable && filter.metric === 'seq_final_reward' && config.algorithm.use_kl_in_reward) {
    problems.push(
      'algorithm.filter_groups.metric=seq_final_reward with algorithm.use_kl_in_reward=true: the KL penalty needs ' +
        "the reference log-probs, computed here after the groups are filtered (verl's recipe reads them before " +
        'computing them) — use metric seq_reward or acc',
    );
  }
  if (config.reward_model.enable && config.custom_reward_function.path !== null) {
    problems.push(
      'reward_model.enable=true scores with the reward model, so custom_reward_function.path would be ignored — use ' +
        'one of them',
    );
  }

  const { retriever } = config;
  if (config.do_search) {
    if (retriever.url !== null && retriever.corpus_path !== null) {
      problems.push(
        'retriever.url and retriever.corpus_path are both set: the run would search the server and ignore the corpus ' +
          '— set one of them',
      );
    }
    if (
      retriever.url === null &&
      retriever.corpus_path === null &&
      (config.data.train_files !== null || config.data.builtin_task !== 'search_qa')
    ) {
      problems.push(
        'do_search=true needs a retriever: set retriever.url (a Search-R1 retrieval server) or retriever.corpus_path ' +
          '(a JSONL corpus for the built-in BM25)',
      );
    }
  } else {
    if (retriever.url !== null || retriever.corpus_path !== null) {
      problems.push(
        `retriever.${retriever.url !== null ? 'url' : 'corpus_path'} is set but do_search=false: no search would run ` +
          `— set do_search=true`,
      );
    }
    if (config.data.train_files === null && config.data.builtin_task === 'search_qa') {
      problems.push('data.builtin_task=search_qa is a search task — set do_search=true');
    }
  }

  checkRolloutServers(config, problems);
  const multiTurn = config.actor_rollout_ref.rollout.multi_turn;
  if (multiTurn.enable && config.do_search) {
    problems.push(
      'actor_rollout_ref.rollout.multi_turn.enable=true and do_search=true are two multi-turn protocols — use one ' +
        "(verl's SearchTool in a tool config gives the tool loop a retriever)",
    );
  }
  if (!multiTurn.enable && multiTurn.tool_config_path !== null) {
    problems.push(
      'actor_rollout_ref.rollout.multi_turn.tool_config_path is set but multi_turn.enable=false: no tool would run — ' +
        'set multi_turn.enable=true',
    );
  }

  const emptyRunDirectory = emptyRunDirectoryProblem(trainer.default_local_dir);
  if (emptyRunDirectory) problems.push(emptyRunDirectory);
  if (trainer.resume_mode === 'resume_path') {
    if (trainer.resume_from_path === null)
      problems.push('trainer.resume_mode=resume_path needs trainer.resume_from_path (a global_step_N directory)');
    else if (!/global_step_\d+\/?$/.test(trainer.resume_from_path))
      problems.push(
        `trainer.resume_from_path must name a global_step_N directory, got ${show(trainer.resume_from_path)}`,
      );
  } else if (trainer.resume_from_path !== null) {
    problems.push(
      `trainer.resume_from_path is set but trainer.resume_mode=${trainer.resume_mode} ignores it — set ` +
        `trainer.resume_mode=resume_path`,
    );
  }

  for (const [path, betas] of [
    ['actor_rollout_ref.actor.optim.betas', actor.optim.betas],
    ['critic.optim.betas', critic.optim.betas],
  ] as const) {
    const problem = betasProblem(path, betas);
    if (problem) problems.push(problem);
  }
}

/** Rollout servers (name=sglang|vllm with server_urls): what they cannot run yet, and keys that need them. verl
 *  launch scripts pass name=vllm and mode=async as a matter of course: without server_urls those keep generating
 *  in-process, as before. */
function checkRolloutServers(config: PpoConfig, problems: string[]): void {
  const rollout = config.actor_rollout_ref.rollout;
  if (rollout.server_urls.length === 0) return;
  if (rollout.name === 'hf') {
    problems.push(
      `actor_rollout_ref.rollout.server_urls is set but actor_rollout_ref.rollout.name=hf generates in-process — set ` +
        `name=sglang (SGLang or node serve.js) or name=vllm`,
    );
  }
  if (config.do_search)
    problems.push(
      'actor_rollout_ref.rollout.server_urls with do_search=true: multi-turn search rollouts run in-process only — ' +
        'remove server_urls',
    );
  if (rollout.multi_turn.enable)
    problems.push(
      'actor_rollout_ref.rollout.server_urls with multi_turn.enable=true: tool-agent rollouts run in-process only — ' +
        'remove server_urls',
    );
  if (config.actor_rollout_ref.model.lora.merge)
    problems.push(
      'actor_rollout_ref.model.lora.merge=true with actor_rollout_ref.rollout.server_urls: the servers are sent the ' +
        'LoRA adapter each step, not merged weights — remove lora.merge (the numbers are the same)',
    );
  if (rollout.mode === 'async' && config.algorithm.filter_groups.enable) {
    problems.push(
      'actor_rollout_ref.rollout.mode=async with algorithm.filter_groups.enable=true: dynamic sampling draws a ' +
        'varying number of batches, which one-step-off generation cannot prefetch — use mode=sync',
    );
  }
}

/** rollout_rs's option list and thresholds parse. Checked on loading, so `--cfg job` refuses what a run would. */
function checkRolloutCorrection(rc: PpoConfig['algorithm']['rollout_correction'], problems: string[]): void {
  if (rc.rollout_rs !== null) {
    try {
      parseRolloutRs(rc.rollout_rs, rc.rollout_rs_threshold);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
}
