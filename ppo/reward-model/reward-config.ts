// The reward-model job's configuration, in ONE typed object: verl has no reward-model trainer, so the groups and
// training keys are its SFT trainer's (sft_trainer.yaml: data.train_files, data.train_batch_size,
// data.micro_batch_size_per_gpu, data.max_length, model.partial_pretrain, optim.*, trainer.*) and the dataset keys are
// OpenRLHF's train_rm names (prompt_key, chosen_key, rejected_key; TRL's column names as their defaults) plus TRL's
// margin column. Defaults where they differ from the SFT job's: OpenRLHF's train_rm (one epoch, warmup ratio 0.03, no
// weight decay, max length 512). Read from `key=value` arguments (job-config.ts). Browser-safe.
import { parseJobOverrides, type JobSchema } from '../config/supervised-keys.ts';
import { SAVE_DTYPES, SFT_DEFAULTS, SFT_LR_SCHEDULERS } from '../sft/sft-config.ts';

export const REWARD_DEFAULTS = {
  data: {
    train_batch_size: 128,
    micro_batch_size_per_gpu: 4,
    train_files: null as string | string[] | null,
    val_files: null as string | string[] | null,
    prompt_key: 'prompt',
    chosen_key: 'chosen',
    rejected_key: 'rejected',
    margin_key: 'margin',
    max_length: 512,
  },
  model: {
    partial_pretrain: null as string | null,
    enable_gradient_checkpointing: false,
  },
  optim: { ...SFT_DEFAULTS.optim, lr: 9e-6, weight_decay: 0, warmup_steps_ratio: 0.03 },
  trainer: { ...SFT_DEFAULTS.trainer, project_name: 'reward-model', experiment_name: 'test', total_epochs: 1 },
};

export type RewardConfig = typeof REWARD_DEFAULTS;

export const REWARD_SCHEMA: JobSchema<RewardConfig> = {
  defaults: REWARD_DEFAULTS,
  nullable: new Set([
    'data.train_files',
    'data.val_files',
    'model.partial_pretrain',
    'trainer.resume_path',
    'trainer.total_training_steps',
  ]),
  pathLists: new Set(['data.train_files', 'data.val_files']),
  choices: { 'optim.lr_scheduler': SFT_LR_SCHEDULERS, 'trainer.save_dtype': SAVE_DTYPES },
  integers: /batch_size|max_length|total_|seed|_freq/,
  aliases: { 'data.micro_batch_size': 'data.micro_batch_size_per_gpu' },
  onlyDefault: {},
  check: () => [],
};

export function parseRewardOverrides(overrides: readonly string[]): { config: RewardConfig; notes: string[] } {
  return parseJobOverrides(REWARD_SCHEMA, overrides);
}
