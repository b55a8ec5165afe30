// verl and Search-R1 keys that are not keys of the schema but that their launch scripts pass: aliases (a deprecated
// or forked spelling of a schema key), keys honoured only at one value, verl's unimplemented features at their
// defaults (verl-unimplemented.ts), and keys that configure a GPU cluster or an inference/sharding engine (vLLM,
// SGLang, FSDP, Megatron, Ray) and mean nothing to one WebGPU adapter — accepted, and listed by the run in one
// line with the reason.
import { VERL_UNIMPLEMENTED_DEFAULTS, VERL_MIRROR_KEYS } from './verl-unimplemented.ts';

/** What the loader does with a key that is not in the schema. */
export type CompatKey =
  /** value: what the alias sets its target to; undefined leaves the target alone. */
  | { kind: 'alias'; to: string; source: string; value?: (value: unknown) => unknown }
  | { kind: 'only'; value: unknown; reason: string }
  | { kind: 'default'; value: unknown }
  | { kind: 'marker' }
  | { kind: 'ignored'; reason: string };

/** verl's config writes the deprecated warmup_style as null: not set, so lr_scheduler_type stands. */
const unsetWhenNull = (value: unknown) => (value === null ? undefined : value);

/** Search-R1 writes null for "every sample", verl -1. */
const allWhenNull = (value: unknown) => (value === null ? -1 : value);

/**
 * Spellings that set a schema key. An alias wins over its target whatever the order, as in the programs that
 * define them (verl reads warmup_style before lr_scheduler_type; Search-R1's max_start_length is the prompt
 * limit while its max_prompt_length bounds the whole multi-turn context).
 */
const ALIASES: Record<string, { to: string; source: string; value?: (value: unknown) => unknown }> = {
  'actor_rollout_ref.actor.optim.warmup_style': {
    to: 'actor_rollout_ref.actor.optim.lr_scheduler_type',
    source: 'verl, deprecated',
    value: unsetWhenNull,
  },
  'critic.optim.warmup_style': {
    to: 'critic.optim.lr_scheduler_type',
    source: 'verl, deprecated',
    value: unsetWhenNull,
  },
  'actor_rollout_ref.rollout.log_prob_micro_batch_size': {
    to: 'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu',
    source: 'verl, deprecated; one device, so global = per GPU',
    value: unsetWhenNull,
  },
  'actor_rollout_ref.ref.log_prob_micro_batch_size': {
    to: 'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu',
    source: 'verl, deprecated; one device, so global = per GPU',
    value: unsetWhenNull,
  },
  'reward_model.micro_batch_size': {
    to: 'reward_model.micro_batch_size_per_gpu',
    source: 'verl, deprecated; one device, so global = per GPU',
    value: unsetWhenNull,
  },
  'critic.forward_micro_batch_size': {
    to: 'critic.forward_micro_batch_size_per_gpu',
    source: 'verl, deprecated; one device, so global = per GPU',
    value: unsetWhenNull,
  },
  'data.train_data_num': { to: 'data.train_max_samples', source: 'Search-R1', value: allWhenNull },
  'data.val_data_num': { to: 'data.val_max_samples', source: 'Search-R1', value: allWhenNull },
  'data.max_start_length': { to: 'data.max_prompt_length', source: 'Search-R1: the prompt before the first turn' },
  'data.shuffle_train_dataloader': { to: 'data.shuffle', source: 'Search-R1' },
  'actor_rollout_ref.rollout.n_agent': { to: 'actor_rollout_ref.rollout.n', source: 'Search-R1' },
  'reward.reward_manager.name': { to: 'reward_model.reward_manager', source: 'verl DAPO recipe config' },
  'reward_model.overlong_buffer.enable': {
    to: 'reward_model.reward_kwargs.overlong_buffer_cfg.enable',
    source: 'verl DAPO recipe config',
  },
  'reward_model.overlong_buffer.len': {
    to: 'reward_model.reward_kwargs.overlong_buffer_cfg.len',
    source: 'verl DAPO recipe config',
  },
  'reward_model.overlong_buffer.penalty_factor': {
    to: 'reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor',
    source: 'verl DAPO recipe config',
  },
  'reward_model.overlong_buffer.log': {
    to: 'reward_model.reward_kwargs.overlong_buffer_cfg.log',
    source: 'verl DAPO recipe config',
  },
};

/** Keys whose only meaning here is one value; any other value is an error naming the reason. */
const ONLY: Record<string, { value: unknown; reason: string }> = {
  'actor_rollout_ref.actor.state_masking': {
    value: true,
    reason: 'retrieved <information> tokens are always masked out of the loss (response_mask 0)',
  },
  'algorithm.no_think_rl': { value: false, reason: 'the search protocol always lets the model reason before it acts' },
  'critic.model.lora_rank': {
    value: 0,
    reason: 'LoRA is implemented for the actor only; the critic trains every parameter',
  },
  'trainer.device': { value: 'cuda', reason: 'the device is the WebGPU adapter' },
  'transfer_queue.enable': {
    value: false,
    reason: "verl's TransferQueue is a Ray data service; batches stay in one process here",
  },
  'algorithm.rollout_correction.rollout_rs_threshold_lower': {
    value: null,
    reason:
      'verl main has no such key: a *_k1 rollout_rs option takes its ratio bounds in rollout_rs_threshold as ' +
      'LOWER_UPPER (e.g. 0.5_2.0)',
  },
};

const CLUSTER = 'GPU-cluster layout; one WebGPU adapter here';
const INFERENCE = "vLLM/SGLang setting; generation runs on this engine's own decoder";
const SHARDING = 'FSDP/Megatron setting; parameters live in one arena on one adapter';
const SERVICE = 'Ray/HDFS/profiler service this engine does not run';
const PADDING = 'padding removal: batches here are padded and masked, the same math';

/** Patterns (one `*` = one segment, `**` = any segments) of keys accepted and ignored, with the reason. */
const IGNORED: [string, string][] = [
  ['**.tensor_model_parallel_size', CLUSTER],
  ['**.pipeline_model_parallel_size', CLUSTER],
  ['**.virtual_pipeline_model_parallel_size', CLUSTER],
  ['**.context_parallel_size', CLUSTER],
  ['**.expert_model_parallel_size', CLUSTER],
  ['**.expert_tensor_parallel_size', CLUSTER],
  ['**.data_parallel_size', CLUSTER],
  ['**.ulysses_sequence_parallel_size', CLUSTER],
  ['**.sequence_parallel', CLUSTER],
  ['trainer.balance_batch', CLUSTER],
  ['actor_rollout_ref.nccl_timeout', CLUSTER],
  ['trainer.ray_wait_register_center_timeout', SERVICE],
  ['trainer.default_hdfs_dir', SERVICE],
  ['trainer.del_local_ckpt_after_load', SERVICE],
  ['trainer.use_legacy_worker_impl', SERVICE],
  ['trainer.esi_redundant_time', SERVICE],
  ['trainer.profile_steps', SERVICE],
  ['trainer.profile_continuous_steps', SERVICE],
  ['trainer.controller_nsight_options.**', SERVICE],
  ['trainer.worker_nsight_options.**', SERVICE],
  ['trainer.npu_profile.**', SERVICE],
  ['ray_init.**', SERVICE],
  ['ray_kwargs.**', SERVICE],
  ['global_profiler.**', SERVICE],
  ['**.profiler.**', SERVICE],
  ['**.checkpoint.**', 'checkpoint contents are fixed: complete Hugging Face directories with optimizer state'],
  ['**.fsdp_config.**', SHARDING],
  ['**.megatron.**', SHARDING],
  ['**.strategy', SHARDING],
  ['**.use_torch_compile', SHARDING],
  ['**.use_fused_kernels', SHARDING],
  ['**.fused_kernel_options.**', SHARDING],
  ['**.use_liger', SHARDING],
  ['**.enable_activation_offload', SHARDING],
  ['**.use_shm', SHARDING],
  ['**.trust_remote_code', "architectures are this engine's own (Qwen2/Qwen3/Llama); no remote code runs"],
  ['**.external_lib', "architectures are this engine's own; no Python library is imported"],
  ['**.override_config.**', SHARDING],
  ['**.use_remove_padding', PADDING],
  ['**.entropy_from_logits_with_chunking', 'the fused classifier always computes entropy chunk by chunk'],
  ['**.entropy_checkpointing', 'the fused classifier always computes entropy chunk by chunk'],
  ['actor_rollout_ref.hybrid_engine', 'actor and rollout always share one set of weights here'],
  ['actor_rollout_ref.rollout.max_num_batched_tokens', INFERENCE],
  ['actor_rollout_ref.rollout.max_num_seqs', INFERENCE],
  ['actor_rollout_ref.rollout.max_model_len', INFERENCE],
  ['actor_rollout_ref.rollout.enforce_eager', INFERENCE],
  ['actor_rollout_ref.rollout.free_cache_engine', INFERENCE],
  ['actor_rollout_ref.rollout.load_format', INFERENCE],
  ['actor_rollout_ref.rollout.dtype', INFERENCE],
  ['actor_rollout_ref.rollout.layered_summon', INFERENCE],
  ['actor_rollout_ref.rollout.enable_chunked_prefill', INFERENCE],
  // Wakes the inference engine's weights and KV cache in stages to bound peak memory; decoding here shares one arena.
  ['actor_rollout_ref.rollout.multi_stage_wake_up', INFERENCE],
  ['actor_rollout_ref.rollout.enable_prefix_caching', INFERENCE],
  ['actor_rollout_ref.rollout.disable_log_stats', INFERENCE],
  ['actor_rollout_ref.rollout.swap_space', INFERENCE],
  ['actor_rollout_ref.rollout.ignore_eos', INFERENCE],
  ['actor_rollout_ref.rollout.cudagraph_capture_sizes', INFERENCE],
  ['actor_rollout_ref.rollout.engine_kwargs.**', INFERENCE],
  ['actor_rollout_ref.rollout.update_weights_bucket_megabytes', INFERENCE],
  // verl's async servers abort the last over_sample_rate of requests to cut tail latency; every response finishes here
  // (over_sample_rate=0), listed among the ignored keys so the user sees it.
  [
    'actor_rollout_ref.rollout.over_sample_rate',
    "tail-latency cut of verl's async servers (aborts the slowest requests); every response finishes here, as at 0",
  ],
  ['actor_rollout_ref.rollout.skip_tokenizer_init', INFERENCE],
  ['actor_rollout_ref.rollout.prompt_length', 'follows data.max_prompt_length'],
  ['actor_rollout_ref.rollout.response_length', 'follows data.max_response_length'],
  ['reward_model.rollout.**', INFERENCE],
  ['reward_model.use_reward_loop', 'reward models score in-process after the rollout'],
  ['reward_model.num_workers', CLUSTER],
  ['reward_model.launch_reward_fn_async', 'rewards are computed in-process'],
  ['reward_model.model.input_tokenizer', "the reward model scores the actor's token ids; tokenizers must match"],
  ['data.return_raw_chat', "prompts are always rendered here with the model's chat template"],
  ['data.return_raw_input_ids', "prompts are always rendered here with the model's chat template"],
  ['data.return_full_prompt', "prompts are always rendered here with the model's chat template"],
  ['data.dataloader_num_workers', 'prompts are read in-process'],
  ['data.filter_overlong_prompts_workers', 'prompts are read and filtered in-process'],
];

function patternRegex(pattern: string): RegExp {
  const body = pattern
    .split('.')
    .map((part) => (part === '**' ? '(?:[^.]+\\.)*[^.]+' : part === '*' ? '[^.]+' : part))
    .join('\\.');
  return new RegExp(`^${body}$`);
}

const IGNORED_REGEXES: [RegExp, string][] = IGNORED.map(([pattern, reason]) => [patternRegex(pattern), reason]);

/** How a key outside the schema is taken, or null when it is unknown. */
export function compatKey(path: string): CompatKey | null {
  // verl's dataclass markers (`_target_: verl.workers.config.FSDPActorConfig`) say how Python builds the group.
  if (path.endsWith('._target_')) return { kind: 'marker' };
  if (path in ALIASES) return { kind: 'alias', ...ALIASES[path] };
  if (path in ONLY) return { kind: 'only', ...ONLY[path] };
  if (path in VERL_UNIMPLEMENTED_DEFAULTS) return { kind: 'default', value: VERL_UNIMPLEMENTED_DEFAULTS[path] };
  if (VERL_MIRROR_KEYS.includes(path)) return { kind: 'ignored', reason: "mirrors another key in verl's config" };
  for (const [regex, reason] of IGNORED_REGEXES) if (regex.test(path)) return { kind: 'ignored', reason };
  return null;
}

/** Top-level blocks of a Hydra config file that compose the config rather than being keys of it. */
export const HYDRA_BLOCKS: Record<string, string> = {
  defaults: "the defaults list composes verl's component files, whose keys the schema already holds",
  hydra: "Hydra's own settings (run directory, job name; searchpath: verl's own configs are built in)",
};
