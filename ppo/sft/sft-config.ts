// The SFT job's configuration: verl's sft_trainer.yaml keys (verl/trainer/config/sft_trainer.yaml) with verl's
// defaults, in ONE typed object, and the `key.sub=value` command line of verl's
// `torchrun … -m verl.trainer.fsdp_sft_trainer key=value …` launch, accepted as written: Hydra's `+key=` / `++key=`,
// values read as YAML (`['question']`, `null`, `1e-5`), `${trainer.project_name}`-style interpolation in
// trainer.default_local_dir. verl's cluster keys (GPU counts, FSDP, sequence parallelism) are accepted and ignored
// with a note: its batch sizes are global, so one adapter computes the same steps. Unknown keys are errors with a
// suggestion. Browser-safe.
import { parse as parseYaml } from 'yaml';
import { ConfigError, show, suggestKeys } from '../config/errors.ts';

export const SFT_TRUNCATIONS = ['error', 'left', 'right'] as const;
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
  },
};

export type SftConfig = typeof SFT_DEFAULTS;

/** Keys whose default is null, and which may be set to null. */
const NULLABLE = new Set(['data.train_files', 'data.val_files', 'data.prompt_dict_keys', 'data.response_dict_keys', 'model.partial_pretrain',
  'trainer.resume_path', 'trainer.total_training_steps']);
/** Keys that take a path or a list of paths / names. */
const PATH_LISTS = new Set(['data.train_files', 'data.val_files', 'model.target_modules']);
const CHOICES: Record<string, readonly string[]> = { 'data.truncation': SFT_TRUNCATIONS, 'optim.lr_scheduler': SFT_LR_SCHEDULERS };

/** verl keys with no effect on one adapter (or in this engine's SFT), accepted with the reason. */
const IGNORED: [RegExp, string][] = [
  [/^trainer\.(nnodes|n_gpus_per_node)$/, 'this engine trains on one WebGPU adapter; verl\'s batch sizes are global, so the steps are the same'],
  [/^(ulysses_sequence_parallel_size|use_remove_padding|data\.balance_dp_token|model\.(fsdp_config(\..+)?|use_liger|trust_remote_code|external_lib)|trainer\.(default_hdfs_dir|max_ckpt_to_keep|device))$/,
    'a distributed-training or PyTorch setting without meaning here'],
];
/** verl keys accepted only at verl's default, which is what this engine does. */
const ONLY_DEFAULT: Record<string, unknown> = { 'data.chat_template': null, 'data.custom_cls.path': null, 'data.custom_cls.name': null };

function flatten(group: Record<string, unknown>, prefix = ''): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [name, value] of Object.entries(group)) {
    const path = prefix ? `${prefix}.${name}` : name;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) for (const [k, v] of flatten(value as Record<string, unknown>, path)) out.set(k, v);
    else out.set(path, value);
  }
  return out;
}

export const SFT_KEYS: ReadonlyMap<string, unknown> = flatten(SFT_DEFAULTS);

function checkValue(key: string, value: unknown, given: string): string | null {
  const fallback = SFT_KEYS.get(key);
  if (value === null) return NULLABLE.has(key) ? null : `${key}=${given}: may not be null`;
  if (PATH_LISTS.has(key)) {
    return typeof value === 'string' || (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string')) ? null : `${key}=${given}: expected a path or a list of them`;
  }
  if (CHOICES[key]) return CHOICES[key].includes(value as string) ? null : `${key}=${given}: expected one of ${CHOICES[key].join(', ')}`;
  if (Array.isArray(fallback) || key.endsWith('_dict_keys')) {
    const element = key === 'optim.betas' ? 'number' : 'string';
    return Array.isArray(value) && value.every((v) => typeof v === element) ? null : `${key}=${given}: expected a list of ${element}s`;
  }
  if (typeof fallback === 'number' || key === 'trainer.total_training_steps') {
    if (typeof value !== 'number' || !Number.isFinite(value)) return `${key}=${given}: expected a number`;
    const integer = /batch_size|max_length|lora_rank|total_|seed|_freq/.test(key);
    if (integer && !Number.isInteger(value)) return `${key}=${given}: expected an integer`;
    if (/batch_size|max_length|total_epochs|total_training_steps/.test(key) && value < 1) return `${key}=${given}: must be ≥ 1`;
    return value < 0 && !/_freq$/.test(key) ? `${key}=${given}: must be ≥ 0` : null;
  }
  const expected = fallback === null ? 'string' : typeof fallback;
  return typeof value === expected ? null : `${key}=${given}: expected a ${expected}`;
}

function interpolate(text: string, values: ReadonlyMap<string, unknown>, key: string): string {
  return text.replace(/\$\{([\w.]+)\}/g, (_, ref: string) => {
    if (!values.has(ref)) throw new ConfigError([`${key}: \${${ref}} names no key`]);
    return String(values.get(ref));
  });
}

/** The configuration of `overrides` (verl's `key=value` arguments) over verl's defaults, and notes on ignored keys. */
export function parseSftOverrides(overrides: readonly string[]): { config: SftConfig; notes: string[] } {
  const values = new Map(SFT_KEYS);
  const problems: string[] = [];
  const notes: string[] = [];
  for (const arg of overrides) {
    const eq = arg.indexOf('=');
    if (eq <= 0) {
      problems.push(`${arg}: expected key=value (e.g. data.train_files=train.parquet)`);
      continue;
    }
    const key = arg.slice(0, eq).replace(/^\+\+?/, '');
    const given = arg.slice(eq + 1);
    const value = given === '' ? '' : parseYaml(given);
    // verl's deprecated data.micro_batch_size (global) is its per-GPU size on one adapter.
    const target = key === 'data.micro_batch_size' ? 'data.micro_batch_size_per_gpu' : key;
    if (target in ONLY_DEFAULT) {
      if (value !== ONLY_DEFAULT[target]) problems.push(`${key}=${given}: not implemented in this engine's SFT job; only verl's default ${show(ONLY_DEFAULT[target])} is accepted`);
      continue;
    }
    const ignored = IGNORED.find(([pattern]) => pattern.test(key));
    if (ignored) {
      notes.push(`note: ${key} is ignored (${ignored[1]})`);
      continue;
    }
    if (!values.has(target)) {
      const suggestions = suggestKeys(key, SFT_KEYS.keys());
      problems.push(`unknown key ${key}${suggestions.length > 0 ? ` — did you mean ${suggestions.join(' or ')}?` : ''}`);
      continue;
    }
    const problem = checkValue(target, value, given);
    if (problem) problems.push(problem);
    else values.set(target, value);
  }
  if (values.get('data.train_files') === null) problems.push('data.train_files is required (a .parquet or .jsonl file, or a list of them)');
  if (values.get('model.partial_pretrain') === null) problems.push('model.partial_pretrain is required (a Hugging Face model directory)');
  const batch = values.get('data.train_batch_size') as number;
  const micro = values.get('data.micro_batch_size_per_gpu') as number;
  if (batch % micro !== 0) problems.push(`data.train_batch_size=${batch} is not a multiple of data.micro_batch_size_per_gpu=${micro} (a step is whole micro-batches)`);
  if ((values.get('model.lora_rank') as number) > 0) problems.push('model.lora_rank > 0: LoRA is not implemented in this engine\'s SFT job yet; only verl\'s default 0 (full fine-tuning) is accepted');
  if (problems.length > 0) throw new ConfigError(problems);
  const config = structuredClone(SFT_DEFAULTS) as SftConfig;
  for (const [key, value] of values) {
    const parts = key.split('.');
    let group = config as unknown as Record<string, unknown>;
    for (const part of parts.slice(0, -1)) group = group[part] as Record<string, unknown>;
    group[parts[parts.length - 1]] = key === 'trainer.default_local_dir' ? interpolate(value as string, values, key) : value;
  }
  return { config, notes };
}
