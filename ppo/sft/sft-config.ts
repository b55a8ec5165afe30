// The SFT job's configuration: verl's sft_trainer.yaml keys (verl/trainer/config/sft_trainer.yaml) with verl's
// defaults, in ONE typed object, read from the `key=value` arguments of verl's
// `torchrun … -m verl.trainer.fsdp_sft_trainer key=value …` launch as written (job-config.ts). Browser-safe.
import { resolveTargetModules, type LoraSettings } from '../../models/lora.ts';
import { parseJobOverrides, type JobSchema } from '../config/supervised-keys.ts';

export const SFT_TRUNCATIONS = ['error', 'left', 'right'] as const;
/**
 * trainer.save_dtype (train.js's key): the dtype of each checkpoint's Hugging Face model; auto, the dtype the model
 * came in. Whatever it is, a checkpoint whose model is not float32 also holds the float32 weights the optimizer
 * trained (master_weights/), which a resume loads: the resumed steps are the uninterrupted run's.
 */
export const SAVE_DTYPES = ['auto', 'float32', 'bfloat16', 'float16'] as const;
export const SFT_LR_SCHEDULERS = ['cosine', 'constant'] as const;

/** verl's defaults (sft_trainer.yaml); the data and model paths have no default here (verl's are its authors' own). */
export const SFT_DEFAULTS = {
  data: {
    train_batch_size: 256,
    micro_batch_size_per_gpu: 4,
    train_files: null as string | string[] | null,
    val_files: null as string | string[] | null,
    prompt_key: 'question',
    response_key: 'answer',
    prompt_dict_keys: ['question'] as string[] | null,
    response_dict_keys: ['answer'] as string[] | null,
    multiturn: { enable: false, messages_key: 'messages' },
    max_length: 1024,
    truncation: 'error' as (typeof SFT_TRUNCATIONS)[number],
  },
  model: {
    partial_pretrain: null as string | null,
    enable_gradient_checkpointing: false,
    lora_rank: 0,
    lora_alpha: 16,
    target_modules: 'all-linear' as string | string[],
  },
  optim: {
    lr: 1e-5,
    betas: [0.9, 0.95] as number[],
    weight_decay: 0.01,
    warmup_steps_ratio: 0.1,
    clip_grad: 1.0,
    lr_scheduler: 'cosine' as (typeof SFT_LR_SCHEDULERS)[number],
  },
  trainer: {
    default_local_dir: 'checkpoints/${trainer.project_name}/${trainer.experiment_name}',
    resume_path: null as string | null,
    project_name: 'gsm8k-sft',
    experiment_name: 'test',
    total_epochs: 4,
    total_training_steps: null as number | null,
    logger: ['console', 'wandb'] as string[],
    seed: 1,
    save_freq: -1,
    test_freq: -1,
    save_dtype: 'auto' as (typeof SAVE_DTYPES)[number],
  },
};

export type SftConfig = typeof SFT_DEFAULTS;

export const SFT_SCHEMA: JobSchema<SftConfig> = {
  defaults: SFT_DEFAULTS,
  nullable: new Set([
    'data.train_files',
    'data.val_files',
    'data.prompt_dict_keys',
    'data.response_dict_keys',
    'model.partial_pretrain',
    'trainer.resume_path',
    'trainer.total_training_steps',
  ]),
  pathLists: new Set(['data.train_files', 'data.val_files', 'model.target_modules']),
  choices: {
    'data.truncation': SFT_TRUNCATIONS,
    'optim.lr_scheduler': SFT_LR_SCHEDULERS,
    'trainer.save_dtype': SAVE_DTYPES,
  },
  integers: /batch_size|max_length|lora_rank|total_|seed|_freq/,
  // verl's deprecated data.micro_batch_size (global) is its per-GPU size on one adapter.
  aliases: { 'data.micro_batch_size': 'data.micro_batch_size_per_gpu' },
  onlyDefault: { 'data.chat_template': null, 'data.custom_cls.path': null, 'data.custom_cls.name': null },
  check: (values) => {
    try {
      resolveTargetModules(
        moduleList(values.get('model.target_modules') as string | string[]),
        null,
        'model.target_modules',
      );
      return [];
    } catch (err) {
      return [(err as Error).message];
    }
  },
};

/** target_modules as verl's YAML allows it: one name ('all-linear') or a list. */
function moduleList(target: string | string[]): string[] {
  return typeof target === 'string' ? [target] : target;
}

/** The LoRA adapters verl's SFT trainer builds with PEFT (model.lora_rank > 0; lora_alpha, target_modules), or null
 *  for full fine-tuning. */
export function sftLoraSettings(model: SftConfig['model']): LoraSettings | null {
  if (model.lora_rank === 0) return null;
  return {
    rank: model.lora_rank,
    alpha: model.lora_alpha,
    useRslora: false,
    targetModules: resolveTargetModules(moduleList(model.target_modules), null, 'model.target_modules'),
  };
}

/**
 * The SFT job's configuration of `overrides` (verl's `key=value` arguments) over verl's defaults, and notes on ignored
 * keys.
 */
export function parseSftOverrides(overrides: readonly string[]): { config: SftConfig; notes: string[] } {
  return parseJobOverrides(SFT_SCHEMA, overrides);
}
