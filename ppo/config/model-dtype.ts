// The stored dtype of each model's weights, from verl's fsdp_config.model_dtype keys, and the compute dtype of a
// trained one, from fsdp_config.dtype. Frozen models (the reference, the reward model, a frozen critic, the actor's
// LoRA base) may keep their matrices in bf16/f16 — half the bytes, read by kernels that unpack them to float32;
// trained weights stay float32 master weights (the optimizer updates those; a half model_dtype asked for a fully
// trained model is reported in one line rather than honoured), and with fsdp_config.dtype bf16/f16 the model
// computes on a half-precision copy of them (mixed precision, models/decoder.ts setComputeDtype). Browser-safe.
import type { FloatDType } from '../../engine/index.ts';
import { TORCH_DTYPE_STORAGE, type TorchDtype } from '../../models/hf-config.ts';
import type { WeightStorage } from '../../models/parameter-layout.ts';
import type { PpoConfig, ModelDtype } from './schema.ts';

const FROM_KEY: Readonly<Record<ModelDtype, FloatDType>> = {
  fp32: 'f32',
  float32: 'f32',
  bf16: 'bf16',
  bfloat16: 'bf16',
  fp16: 'f16',
  float16: 'f16',
};

export type FrozenModel = 'reference' | 'reward_model' | 'critic' | 'teacher';

const KEYS: Readonly<Record<FrozenModel, (c: PpoConfig) => ModelDtype | null>> = {
  reference: (c) => c.actor_rollout_ref.ref.fsdp_config.model_dtype,
  reward_model: (c) => c.reward_model.model.fsdp_config.model_dtype,
  critic: (c) => c.critic.model.fsdp_config.model_dtype,
  // verl's distillation teachers are inference servers with no model_dtype key: the checkpoint's own dtype.
  teacher: () => null,
};

/** The dtype a model's matrices are stored in, given the torch_dtype of the checkpoint it loads from: the
 *  model's model_dtype key, or when that is null the checkpoint's own dtype. A critic that trains is float32. */
export function weightDtype(config: PpoConfig, model: FrozenModel, checkpointDtype: TorchDtype): FloatDType {
  // A trained critic is float32, except under LoRA, where its frozen base is stored as a frozen model is.
  if (model === 'critic' && !config.critic.freeze && config.critic.model.lora_rank === 0) return 'f32';
  const key = KEYS[model](config);
  return key === null ? TORCH_DTYPE_STORAGE[checkpointDtype] : FROM_KEY[key];
}

const QUANTIZE_KEYS: Readonly<Record<'reference' | 'reward_model', (c: PpoConfig) => QuantizeKeys>> = {
  reference: (c) => c.actor_rollout_ref.ref,
  reward_model: (c) => c.reward_model.model,
};
/** The keys that quantize a frozen model (a LoRA base, the reference, the reward model). */
export interface QuantizeKeys {
  load_in_4bit: boolean;
  use_bnb_nested_quant: boolean;
  load_in_8bit: boolean;
}

/** How a frozen reference or reward model stores its matrices: NF4 (its block scales double-quantized with
 *  use_bnb_nested_quant) or int8 layer projections with its load_in_4bit / load_in_8bit key (embedding and LM head
 *  then in the checkpoint's dtype, norms and a score head float32, as for a quantized LoRA base), else
 *  weightDtype. */
export function frozenStorage(
  config: PpoConfig,
  model: 'reference' | 'reward_model',
  checkpointDtype: TorchDtype,
): WeightStorage {
  const keys = QUANTIZE_KEYS[model](config);
  if (keys.load_in_4bit) return keys.use_bnb_nested_quant ? 'nf4-nested' : 'nf4';
  if (keys.load_in_8bit) return 'int8';
  return weightDtype(config, model, checkpointDtype);
}

/** actor_rollout_ref.rollout.dtype as the dtype in-process generation stores its KV cache and decode weights in. */
export function rolloutDtype(config: PpoConfig): FloatDType {
  return FROM_KEY[config.actor_rollout_ref.rollout.dtype];
}

/** Whether the actor trains LoRA adapters (lora_rank > 0, or an adapter to start from): its base is frozen. */
export function actorUsesLora(config: PpoConfig): boolean {
  const m = config.actor_rollout_ref.model;
  return m.lora_rank > 0 || m.lora_adapter_path !== null;
}

/** How the actor's weights are stored, given its checkpoint's torch_dtype: float32 when they all train; under
 *  LoRA the frozen base (which is also the reference) in NF4 with load_in_4bit (its scales double-quantized with
 *  use_bnb_nested_quant), in int8 with load_in_8bit, else as
 *  actor.fsdp_config.model_dtype says, or when that is null in the checkpoint's own dtype. */
export function actorBaseStorage(config: PpoConfig, checkpointDtype: TorchDtype): WeightStorage {
  if (!actorUsesLora(config)) return 'f32';
  const model = config.actor_rollout_ref.model;
  if (model.load_in_4bit) return model.use_bnb_nested_quant ? 'nf4-nested' : 'nf4';
  if (model.load_in_8bit) return 'int8';
  const key = config.actor_rollout_ref.actor.fsdp_config.model_dtype;
  return key === null ? TORCH_DTYPE_STORAGE[checkpointDtype] : FROM_KEY[key];
}

/** Whether the model's weights all train (no LoRA, not frozen): what mixed precision applies to. */
function trainsAllWeights(config: PpoConfig, model: 'actor' | 'critic'): boolean {
  return model === 'actor' ? !actorUsesLora(config) : !config.critic.freeze && config.critic.model.lora_rank === 0;
}

const COMPUTE_KEYS: Readonly<Record<'actor' | 'critic', [string, (c: PpoConfig) => ModelDtype]>> = {
  actor: ['actor_rollout_ref.actor.fsdp_config.dtype', (c) => c.actor_rollout_ref.actor.fsdp_config.dtype],
  critic: ['critic.model.fsdp_config.dtype', (c) => c.critic.model.fsdp_config.dtype],
};

/** The dtype a trained model computes in (fsdp_config.dtype): its weight matrices' half-precision copy, or float32.
 *  float32 for a LoRA actor or critic and a frozen critic, whose frozen matrices compute as stored. */
export function computeDtype(config: PpoConfig, model: 'actor' | 'critic'): FloatDType {
  return trainsAllWeights(config, model) ? FROM_KEY[COMPUTE_KEYS[model][1](config)] : 'f32';
}

/** One line per trained model whose model_dtype asks for half precision (kept float32 here), and per model whose
 *  fsdp_config.dtype asks for half-precision compute that does not apply (LoRA, frozen), or none. */
export function trainedModelDtypeNotes(config: PpoConfig): string[] {
  const asked: [string, ModelDtype | null][] = [];
  // Under LoRA the actor's model_dtype is its frozen base's, honoured by actorBaseStorage.
  if (!actorUsesLora(config))
    asked.push([
      'actor_rollout_ref.actor.fsdp_config.model_dtype',
      config.actor_rollout_ref.actor.fsdp_config.model_dtype,
    ]);
  if (!config.critic.freeze && config.critic.model.lora_rank === 0)
    asked.push(['critic.model.fsdp_config.model_dtype', config.critic.model.fsdp_config.model_dtype]);
  const masters = asked
    .filter(([, value]) => value !== null && FROM_KEY[value] !== 'f32')
    .map(
      ([key, value]) =>
        `${key}=${value}: this model trains, so its weights stay float32 master copies (fsdp_config.dtype sets ` +
        `half-precision compute); only frozen weights (reference, reward model, critic.freeze, a LoRA base) are ` +
        `stored in half precision`,
    );
  const computes = (['actor', 'critic'] as const)
    .filter((model) => !trainsAllWeights(config, model) && FROM_KEY[COMPUTE_KEYS[model][1](config)] !== 'f32')
    .map(
      (model) =>
        `${COMPUTE_KEYS[model][0]}=${COMPUTE_KEYS[model][1](config)}: mixed precision is for weights that all ` +
        `train; this ${model}'s frozen matrices compute in their stored dtype (fsdp_config.model_dtype), its ` +
        `adapters and heads in float32`,
    );
  return [...masters, ...computes];
}
