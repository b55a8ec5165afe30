// verl and Search-R1 keys that are not keys of the schema but that their launch scripts and verl's generated configs
// pass (verl 1dda039b, the schema's VERL_FOLLOWED, and b178a3cd before it): aliases (a deprecated, renamed or forked
// spelling of a schema key), keys honoured only at one value, verl's unimplemented features at their defaults
// (verl-unimplemented.ts), and keys that configure a GPU cluster or an inference/sharding engine (vLLM, SGLang, FSDP,
// Megatron, Ray) and mean nothing to one WebGPU adapter — accepted, and listed by the run in one line with the reason.
import { KEYS } from './schema.ts';
import { VERL_UNIMPLEMENTED_DEFAULTS, VERL_MIRROR_KEYS } from './verl-unimplemented.ts';

/** What the loader does with a key that is not in the schema. */
export type CompatKey =
  /** value: what the alias sets its target to; undefined leaves the target alone. */
  | ({ kind: 'alias' } & Alias)
  | { kind: 'only'; value: unknown; reason: string }
  | { kind: 'default'; value: unknown }
  | { kind: 'marker' }
  | { kind: 'ignored'; reason: string };

/** verl's config writes the deprecated warmup_style as null: not set, so lr_scheduler_type stands. */
const unsetWhenNull = (value: unknown) => (value === null ? undefined : value);

/** Search-R1 writes null for "every sample", verl -1. */
const allWhenNull = (value: unknown) => (value === null ? -1 : value);

interface Alias {
  to: string;
  source: string;
  value?: (value: unknown) => unknown;
  /** Applies only when no layer set the target to a non-null value (verl's legacy reward keys win over reward.*). */
  weak?: boolean;
  /** Applies only while this alias path's own value is > 0 (verl reads the nested lora.* when lora.rank > 0). */
  when?: string;
}

/** Megatron's linear names in verl's nested lora.target_modules, as the Hugging Face projections they cover. */
const MEGATRON_LINEAR: Record<string, string[]> = {
  linear_qkv: ['q_proj', 'k_proj', 'v_proj'],
  linear_proj: ['o_proj'],
  linear_fc1: ['gate_proj', 'up_proj'],
  linear_fc2: ['down_proj'],
};
const hfModules = (value: unknown) =>
  Array.isArray(value) ? value.flatMap((name) => MEGATRON_LINEAR[name as string] ?? [name]) : value;

const excludeModules = (value: unknown) => (Array.isArray(value) && value.length === 0 ? null : hfModules(value));

/** The nested LoRA blocks of verl 1dda039b (verl/utils/config.py: lora.rank > 0 overrides the flat keys), the
 *  actor's and the critic's. */
const NESTED_LORA = 'actor_rollout_ref.model.lora';
const NESTED_CRITIC_LORA = 'critic.model.lora';
const nestedLora = (to: string, value?: (value: unknown) => unknown, model = 'actor_rollout_ref.model'): Alias => ({
  to: `${model}.${to}`,
  source: 'verl 1dda039b nested LoRA, read while lora.rank > 0',
  when: `${model}.lora.rank`,
  value,
});

/** verl 1dda039b's reward.* tree, read as the legacy keys unless a legacy key is set (migrate_legacy_reward_impl). */
const reward = (to: string, value?: (value: unknown) => unknown): Alias => ({
  to,
  source: 'verl 1dda039b reward.*; a non-null legacy key wins',
  weak: true,
  value,
});

/**
 * Spellings that set a schema key. An alias wins over its target whatever the order, as in the programs that
 * define them (verl reads warmup_style before lr_scheduler_type; Search-R1's max_start_length is the prompt
 * limit while its max_prompt_length bounds the whole multi-turn context), unless it is weak or conditional.
 */
const ALIASES: Record<string, Alias> = {
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
  'reward.reward_manager.name': reward('reward_model.reward_manager', unsetWhenNull),
  'reward.custom_reward_function.path': reward('custom_reward_function.path', unsetWhenNull),
  'reward.custom_reward_function.name': reward('custom_reward_function.name', unsetWhenNull),
  'reward.reward_model.enable': reward('reward_model.enable', unsetWhenNull),
  'reward.reward_model.model_path': reward('reward_model.model.path', unsetWhenNull),
  // Not verl's keys (verl loads reward models unquantized): this engine's, spelled in verl HEAD's reward tree as well.
  'reward.reward_model.load_in_4bit': { ...reward('reward_model.model.load_in_4bit'), source: 'reward.reward_model.*' },
  'reward.reward_model.load_in_8bit': { ...reward('reward_model.model.load_in_8bit'), source: 'reward.reward_model.*' },
  'reward.reward_model.use_bnb_nested_quant': {
    ...reward('reward_model.model.use_bnb_nested_quant'),
    source: 'reward.reward_model.*',
  },
  'critic.fsdp.model_dtype': {
    to: 'critic.model.fsdp_config.model_dtype',
    source: "verl 1dda039b moved the critic's FSDP block to critic.fsdp",
    weak: true,
  },
  'critic.fsdp.dtype': {
    to: 'critic.model.fsdp_config.dtype',
    source: "verl 1dda039b moved the critic's FSDP block to critic.fsdp",
    weak: true,
  },
  'actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype': {
    to: 'actor_rollout_ref.actor.fsdp_config.dtype',
    source: "verl before fsdp_config.dtype: FSDP MixedPrecision's param_dtype",
  },
  'critic.model.fsdp_config.mixed_precision.param_dtype': {
    to: 'critic.model.fsdp_config.dtype',
    source: "verl before fsdp_config.dtype: FSDP MixedPrecision's param_dtype",
  },
  'critic.fsdp.optimizer_offload': {
    to: 'critic.model.fsdp_config.optimizer_offload',
    source: "verl 1dda039b moved the critic's FSDP block to critic.fsdp",
    weak: true,
  },
  [`${NESTED_LORA}.rank`]: nestedLora('lora_rank'),
  [`${NESTED_LORA}.alpha`]: nestedLora('lora_alpha'),
  [`${NESTED_LORA}.target_modules`]: nestedLora('target_modules', hfModules),
  [`${NESTED_LORA}.exclude_modules`]: nestedLora('exclude_modules', excludeModules),
  [`${NESTED_LORA}.adapter_path`]: nestedLora('lora_adapter_path', unsetWhenNull),
  [`${NESTED_CRITIC_LORA}.rank`]: nestedLora('lora_rank', undefined, 'critic.model'),
  [`${NESTED_CRITIC_LORA}.alpha`]: nestedLora('lora_alpha', undefined, 'critic.model'),
  [`${NESTED_CRITIC_LORA}.target_modules`]: nestedLora('target_modules', hfModules, 'critic.model'),
  [`${NESTED_CRITIC_LORA}.exclude_modules`]: nestedLora('exclude_modules', excludeModules, 'critic.model'),
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
  'trainer.device': { value: 'cuda', reason: 'the device is the WebGPU adapter' },
  'transfer_queue.enable': {
    value: false,
    reason: "verl's TransferQueue is a Ray data service; batches stay in one process here",
  },
  'actor_rollout_ref.actor.qat.enable': { value: false, reason: 'quantization-aware training is not implemented' },
  'critic.fsdp.qat.enable': { value: false, reason: 'quantization-aware training is not implemented' },
  ...Object.fromEntries(
    [NESTED_LORA, NESTED_CRITIC_LORA].flatMap((block) => [
      [`${block}.type`, { value: 'lora', reason: 'plain LoRA adapters (no DoRA or other PEFT types)' }],
      [`${block}.dropout`, { value: 0, reason: 'LoRA adapters train without dropout here' }],
    ]),
  ),
  'actor_rollout_ref.actor.optim.zero_indexed_step': {
    value: true,
    reason: "the learning-rate schedule counts steps from 0, as verl's default",
  },
  'critic.optim.zero_indexed_step': {
    value: true,
    reason: "the learning-rate schedule counts steps from 0, as verl's default",
  },
  'algorithm.filter_groups.max_inflight_gen_batches': {
    value: 1,
    reason: 'dynamic sampling generates one batch at a time here',
  },
  'actor_rollout_ref.rollout.disaggregation.enabled': {
    value: false,
    reason: 'prefill and decode run in one decoder here',
  },
  'actor_rollout_ref.model.mtp.enable': { value: false, reason: 'multi-token prediction is not implemented' },
  'actor_rollout_ref.model.mtp.enable_train': { value: false, reason: 'multi-token prediction is not implemented' },
  'actor_rollout_ref.model.mtp.enable_rollout': { value: false, reason: 'multi-token prediction is not implemented' },
  'critic.model.mtp.enable': { value: false, reason: 'multi-token prediction is not implemented' },
  'skip.rollout.enable': { value: false, reason: "verl's rollout dump replay is not implemented" },
  'skip.rollout_tq.enable': { value: false, reason: "verl's rollout dump replay is not implemented" },
  'skip.async_rollout.enable': { value: false, reason: "verl's rollout dump replay is not implemented" },
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
const ONE_PROCESS = "verl's Ray trainer modes and data services; the trainer here is one process";
const MTP = 'multi-token prediction settings, read only when mtp.enable';
const SAPO_TAU = "verl's SAPO reads actor.tau_pos / actor.tau_neg; under policy_loss nothing reads it";

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
  // FSDP MixedPrecision's gradient-reduction and buffer dtypes: gradients, norms' buffers and AdamW are float32 here.
  ['**.mixed_precision.reduce_dtype', 'gradients accumulate and AdamW runs in float32 here'],
  ['**.mixed_precision.buffer_dtype', 'gradients accumulate and AdamW runs in float32 here'],
  [
    '**.param_offload',
    'weights stay on the device: every phase of a step reads them (fsdp_config.optimizer_offload moves the AdamW ' +
      'state of the actor and critic to host memory)',
  ],
  ['actor_rollout_ref.ref.fsdp_config.optimizer_offload', 'the reference trains nothing: it has no optimizer state'],
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
  ['actor_rollout_ref.rollout.load_format', INFERENCE],
  ['actor_rollout_ref.rollout.layered_summon', INFERENCE],
  ['actor_rollout_ref.rollout.enable_chunked_prefill', INFERENCE],
  // Wakes the inference engine's weights and KV cache in stages to bound peak memory; decoding here shares one arena.
  ['actor_rollout_ref.rollout.multi_stage_wake_up', INFERENCE],
  ['actor_rollout_ref.rollout.enable_prefix_caching', INFERENCE],
  ['actor_rollout_ref.rollout.disable_log_stats', INFERENCE],
  ['actor_rollout_ref.rollout.swap_space', INFERENCE],
  ['actor_rollout_ref.rollout.cudagraph_capture_sizes', INFERENCE],
  ['actor_rollout_ref.rollout.engine_kwargs.**', INFERENCE],
  ['actor_rollout_ref.rollout.update_weights_bucket_megabytes', INFERENCE],
  ['actor_rollout_ref.rollout.checkpoint_engine.**', INFERENCE],
  ['actor_rollout_ref.rollout.disaggregation.**', INFERENCE],
  ['actor_rollout_ref.rollout.nnodes', CLUSTER],
  ['actor_rollout_ref.rollout.n_gpus_per_node', CLUSTER],
  ['actor_rollout_ref.rollout.full_determinism', INFERENCE],
  ['actor_rollout_ref.rollout.seed', "sampling draws from trainer.seed's generator here"],
  ['actor_rollout_ref.rollout.moe_load_balance_metrics_interval', 'no mixture-of-experts models here'],
  ['model_engine', SHARDING],
  ['trainer.use_v1', ONE_PROCESS],
  ['trainer.v1.**', ONE_PROCESS],
  ['transfer_queue.**', ONE_PROCESS],
  ['skip.**', "verl's rollout dump replay (off)"],
  ['critic.fsdp.**', SHARDING],
  ['actor_rollout_ref.actor.qat.**', 'quantization-aware training settings (off)'],
  ['actor_rollout_ref.model.mtp.**', MTP],
  ['critic.model.mtp.**', MTP],
  [
    `${NESTED_CRITIC_LORA}.merge`,
    'merging adapters before a rollout sync concerns the actor; the critic has no rollout',
  ],
  ...[NESTED_LORA, NESTED_CRITIC_LORA].flatMap((block): [string, string][] => [
    [`${block}.dropout_position`, 'LoRA adapters train without dropout here'],
    [`${block}.lora_A_init_method`, 'initialisation only matters when training starts at rank > 0 (A: Kaiming)'],
    [`${block}.lora_B_init_method`, 'initialisation only matters when training starts at rank > 0 (B: zero)'],
    [`${block}.a2a_experimental`, SHARDING],
    [`${block}.dtype`, 'adapters train in float32 here'],
    [`${block}.freeze_vision_model`, 'text-only models here: no vision tower to freeze'],
    [`${block}.freeze_vision_projection`, 'text-only models here: no vision tower to freeze'],
    [`${block}.freeze_language_model`, 'only the adapters train when LoRA is on'],
  ]),
  ['**.entropy_from_logits_chunk_size', 'the fused classifier picks its own chunk'],
  ['**.pad_to_length', PADDING],
  [
    'actor_rollout_ref.actor.use_prefix_grouper',
    "a speed feature: verl computes a group's shared prompt once; the " + 'numbers are the same',
  ],
  ['actor_rollout_ref.actor.policy_loss.tau_pos', SAPO_TAU],
  ['actor_rollout_ref.actor.policy_loss.tau_neg', SAPO_TAU],
  ['reward.num_workers', CLUSTER],
  ['reward.reward_model.enable_resource_pool', CLUSTER],
  ['reward.reward_model.n_gpus_per_node', CLUSTER],
  ['reward.reward_model.nnodes', CLUSTER],
  ['reward.reward_model.rollout.**', INFERENCE],
  ['distillation.n_gpus_per_node', CLUSTER],
  ['distillation.nnodes', CLUSTER],
  ['distillation.teacher_models.*.num_replicas', CLUSTER],
  ['distillation.teacher_models.*.inference.**', INFERENCE],
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

/** Prefixes of verl 1dda039b's legacy reward trees, which it writes as null for "not set" (legacy_reward_impl.yaml). */
const LEGACY_NULL_UNSET = ['reward_model.', 'custom_reward_function.', 'sandbox_fusion.'];

/** Whether a null at this path means "not set" rather than a value. */
export function isLegacyNullUnset(path: string): boolean {
  return LEGACY_NULL_UNSET.some((prefix) => path.startsWith(prefix));
}

/** How a key outside the schema is taken, or null when it is unknown. */
export function compatKey(path: string): CompatKey | null {
  // verl's dataclass markers (`_target_: verl.workers.config.FSDPActorConfig`) say how Python builds the group.
  if (path.endsWith('._target_')) return { kind: 'marker' };
  if (path in ALIASES) return { kind: 'alias', ...ALIASES[path] };
  // verl 1dda039b's DAPO reads reward.reward_kwargs: the same tree as the legacy reward_model.reward_kwargs.
  if (path.startsWith('reward.reward_kwargs.') && KEYS.has(`reward_model.${path.slice('reward.'.length)}`))
    return { kind: 'alias', ...reward(`reward_model.${path.slice('reward.'.length)}`) };
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
