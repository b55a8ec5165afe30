// The command line of the supervised jobs (SFT, reward model): `key.sub=value` arguments as verl's Hydra reads them
// (`+key=`, `++key=`, values as YAML: `['question']`, `null`, `1e-5`), over a job's defaults held in one typed object,
// with `${group.key}` interpolation in trainer.default_local_dir. Cluster keys are accepted and ignored with a note
// (verl's batch sizes are global, so one adapter takes the same steps); unknown keys are errors with a suggestion;
// every problem is reported at once. Browser-safe.
import { parse as parseYaml } from 'yaml';
import { betasProblem, ConfigError, emptyRunDirectoryProblem, show, suggestKeys } from './errors.ts';

export interface JobSchema<Config> {
  defaults: Config;
  /** Keys whose default is null, and which may be set to null. */
  nullable: ReadonlySet<string>;
  /** Keys that take a path or a non-empty list of them (or of names). */
  pathLists: ReadonlySet<string>;
  choices: Readonly<Record<string, readonly string[]>>;
  /** Keys taking whole numbers. */
  integers: RegExp;
  /** Other spellings of a key (verl's deprecated names, OpenRLHF's). */
  aliases: Readonly<Record<string, string>>;
  /** Keys accepted only at verl's default, which is what this engine does. */
  onlyDefault: Readonly<Record<string, unknown>>;
  /** The job's cross-key problems. */
  check(values: ReadonlyMap<string, unknown>): string[];
}

/** verl keys with no effect on one adapter, accepted with the reason. */
const IGNORED: [RegExp, string][] = [
  [
    /^trainer\.(nnodes|n_gpus_per_node)$/,
    "this engine trains on one WebGPU adapter; verl's batch sizes are global, so the steps are the same",
  ],
  [
    /^(ulysses_sequence_parallel_size|use_remove_padding|data\.balance_dp_token|model\.(fsdp_config(\..+)?|use_liger|trust_remote_code|external_lib)|trainer\.(default_hdfs_dir|max_ckpt_to_keep|device))$/,
    'a distributed-training or PyTorch setting without meaning here',
  ],
];

export function flattenKeys(group: object, prefix = ''): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [name, value] of Object.entries(group)) {
    const path = prefix ? `${prefix}.${name}` : name;
    if (value !== null && typeof value === 'object' && !Array.isArray(value))
      for (const [k, v] of flattenKeys(value, path)) out.set(k, v);
    else out.set(path, value);
  }
  return out;
}

function checkValue<C>(
  schema: JobSchema<C>,
  fallback: unknown,
  key: string,
  value: unknown,
  given: string,
): string | null {
  if (value === null) return schema.nullable.has(key) ? null : `${key}=${given}: may not be null`;
  if (schema.pathLists.has(key)) {
    return typeof value === 'string' ||
      (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string'))
      ? null
      : `${key}=${given}: expected a path or a list of them`;
  }
  const choices = schema.choices[key];
  if (choices)
    return choices.includes(value as string) ? null : `${key}=${given}: expected one of ${choices.join(', ')}`;
  if (Array.isArray(fallback) || key.endsWith('_dict_keys')) {
    const element = Array.isArray(fallback) && typeof fallback[0] === 'number' ? 'number' : 'string';
    return Array.isArray(value) && value.every((v) => typeof v === element)
      ? null
      : `${key}=${given}: expected a list of ${element}s`;
  }
  if (typeof fallback === 'number' || schema.integers.test(key)) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return `${key}=${given}: expected a number`;
    if (schema.integers.test(key) && !Number.isInteger(value)) return `${key}=${given}: expected an integer`;
    if (/batch_size|max_length|total_epochs|total_training_steps/.test(key) && value < 1)
      return `${key}=${given}: must be ≥ 1`;
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

/** The configuration of `overrides` over the schema's defaults, and notes on the keys ignored. */
export function parseJobOverrides<C extends object>(
  schema: JobSchema<C>,
  overrides: readonly string[],
): { config: C; notes: string[] } {
  const keys = flattenKeys(schema.defaults);
  const values = new Map(keys);
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
    const target = schema.aliases[key] ?? key;
    if (target in schema.onlyDefault) {
      if (value !== schema.onlyDefault[target])
        problems.push(
          `${key}=${given}: not implemented in this engine; only verl's default ${show(schema.onlyDefault[target])} ` +
            `is accepted`,
        );
      continue;
    }
    const ignored = IGNORED.find(([pattern]) => pattern.test(key));
    if (ignored) {
      notes.push(`note: ${key} is ignored (${ignored[1]})`);
      continue;
    }
    if (!values.has(target)) {
      const suggestions = suggestKeys(key, keys.keys());
      problems.push(
        `unknown key ${key}${suggestions.length > 0 ? ` — did you mean ${suggestions.join(' or ')}?` : ''}`,
      );
      continue;
    }
    const problem = checkValue(schema, keys.get(target), target, value, given);
    if (problem) problems.push(problem);
    else values.set(target, value);
  }
  for (const key of ['data.train_files', 'model.partial_pretrain']) {
    if (values.get(key) === null)
      problems.push(
        `${key} is required ` +
          `(${key === 'data.train_files' ? 'a .parquet or .jsonl file, or a list of them' : 'a Hugging Face model directory'})`,
      );
  }
  const emptyRunDirectory = emptyRunDirectoryProblem(String(values.get('trainer.default_local_dir') ?? ''));
  if (emptyRunDirectory) problems.push(emptyRunDirectory);
  const betas = betasProblem('optim.betas', values.get('optim.betas'));
  if (betas) problems.push(betas);
  const batch = values.get('data.train_batch_size') as number;
  const micro = values.get('data.micro_batch_size_per_gpu') as number;
  if (batch % micro !== 0)
    problems.push(
      `data.train_batch_size=${batch} is not a multiple of data.micro_batch_size_per_gpu=${micro} (a step is whole ` +
        `micro-batches)`,
    );
  problems.push(...schema.check(values));
  if (problems.length > 0) throw new ConfigError(problems);
  const config = structuredClone(schema.defaults);
  for (const [key, value] of values) {
    const parts = key.split('.');
    let group = config as Record<string, unknown>;
    for (const part of parts.slice(0, -1)) group = group[part] as Record<string, unknown>;
    group[parts[parts.length - 1]] =
      key === 'trainer.default_local_dir' ? interpolate(value as string, values, key) : value;
  }
  return { config, notes };
}

/** `node <job>.js --help`: every key with its default. */
export function formatJobKeys(defaults: object): string {
  return [...flattenKeys(defaults)].map(([k, v]) => `  ${k}=${JSON.stringify(v)}`).join('\n');
}
