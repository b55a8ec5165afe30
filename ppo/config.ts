// The trainer's configuration: verl's ppo_trainer.yaml keys and defaults (only those that mean something in this
// engine, plus algorithm.reward_mask_ratio, critic.freeze and trainer.seed), each with a one-line meaning, in ONE
// typed object. A YAML file overrides the defaults and `key.sub=value` strings override that, as with Hydra;
// `${a.b}` interpolates another key, as with OmegaConf. Unknown keys, wrong types and impossible combinations
// are reported together, each with what was found, what was expected and, where there is one, a suggestion.
// Browser-safe: the caller reads files.
import { parse as parseYaml } from 'yaml';
import { LOSS_AGG_MODES, parseKlEstimator } from '../kernels/ppo-vocabulary.ts';
import { ADV_ESTIMATORS } from './algorithm/advantage-estimators.ts';

type Kind = 'int' | 'float' | 'bool' | 'string' | 'strings' | 'floats' | 'files';
/** An OmegaConf interpolation written as a default, e.g. `${actor_rollout_ref.actor.ppo_epochs}`. */
type Interpolation = `\${${string}}${string}`;

interface Range {
  /** Completes "must be …". */
  what: string;
  test: (value: number) => boolean;
}

const positive: Range = { what: 'positive', test: (v) => v > 0 };
const nonNegative: Range = { what: '≥ 0', test: (v) => v >= 0 };
const unitInterval: Range = { what: 'in [0, 1]', test: (v) => v >= 0 && v <= 1 };
const openUnitInterval: Range = { what: 'in (0, 1)', test: (v) => v > 0 && v < 1 };
const probability: Range = { what: 'in (0, 1]', test: (v) => v > 0 && v <= 1 };

class Key<T> {
  /** Phantom: the value type of this key in PpoConfig. */
  declare readonly valueType: T;

  constructor(
    readonly kind: Kind,
    readonly defaultValue: T | Interpolation,
    readonly help: string,
    readonly nullable = false,
    readonly range: Range | null = null,
    readonly choices: readonly string[] | null = null,
  ) {}
}

const int = (value: number | Interpolation, help: string, range: Range | null = null) => new Key<number>('int', value, help, false, range);
const optInt = (value: number | null | Interpolation, help: string, range: Range | null = null) => new Key<number | null>('int', value, help, true, range);
const float = (value: number, help: string, range: Range | null = null) => new Key<number>('float', value, help, false, range);
const optFloat = (value: number | null, help: string, range: Range | null = null) => new Key<number | null>('float', value, help, true, range);
const bool = (value: boolean | Interpolation, help: string) => new Key<boolean>('bool', value, help);
const str = (value: string, help: string) => new Key<string>('string', value, help);
const optStr = (value: string | null | Interpolation, help: string) => new Key<string | null>('string', value, help, true);
const oneOf = <C extends string>(value: C | Interpolation, choices: readonly C[], help: string) => new Key<C>('string', value, help, false, null, choices);

function optimizerKeys(lr: number) {
  return {
    lr: float(lr, 'AdamW learning rate', nonNegative),
    lr_warmup_steps: int(-1, 'Linear warmup steps; negative: lr_warmup_steps_ratio × total steps'),
    lr_warmup_steps_ratio: float(0, 'Warmup as a fraction of the total training steps', unitInterval),
    warmup_style: oneOf('constant', ['constant', 'cosine'], 'Schedule after warmup'),
    min_lr_ratio: float(0, 'cosine: the final learning rate as a fraction of lr', unitInterval),
    num_cycles: float(0.5, 'cosine: number of cosine half-periods × 2 over the run (0.5 decays once)', positive),
    weight_decay: float(0.01, 'AdamW decoupled weight decay', nonNegative),
    betas: new Key<number[]>('floats', [0.9, 0.999], 'AdamW β1, β2'),
  };
}

const KL_ESTIMATOR_HELP = 'kl|k1, abs, mse|k2, low_var_kl|k3; a trailing + keeps the value and takes the k2 gradient';

/** Every key, its default and its meaning. The shape of this object is the shape of PpoConfig. */
const SCHEMA = {
  data: {
    tokenizer: optStr(null, 'Tokenizer directory; null: the actor model\'s own'),
    train_files: new Key<string | string[] | null>('files', null, 'Training prompts: Parquet or JSONL file(s) in verl\'s RL schema; null: the built-in arithmetic task', true),
    val_files: new Key<string | string[] | null>('files', null, 'Validation prompts, same schema; null: the built-in task\'s held-out set', true),
    prompt_key: str('prompt', 'Column holding each prompt\'s chat messages'),
    reward_fn_key: str('data_source', 'Column that selects the rule reward'),
    max_prompt_length: int(512, 'Longest prompt in tokens, chat template included', positive),
    max_response_length: int(512, 'Longest response in tokens (with do_search: all turns and observations together)', positive),
    max_obs_length: int(512, 'do_search: observation tokens kept per search (longer ones are cut)', positive),
    builtin_task: oneOf('arithmetic', ['arithmetic', 'search_qa'], 'Task of the built-in run (train_files null): arithmetic, or search_qa (invented facts found only by searching; needs do_search)'),
    train_batch_size: int(1024, 'Prompts per training step (each sampled rollout.n times)', positive),
    val_batch_size: optInt(null, 'Prompts per validation batch; null: the whole validation set', positive),
    shuffle: bool(true, 'Reshuffle the training prompts every epoch'),
    seed: int(1, 'Seed of the per-epoch shuffle'),
    filter_overlong_prompts: bool(false, 'Drop prompts longer than max_prompt_length instead of applying data.truncation'),
    truncation: oneOf('error', ['error', 'left', 'right', 'middle'], 'Overlong prompts: fail, keep the last (left) / first (right) tokens, or both ends (middle)'),
  },
  actor_rollout_ref: {
    model: {
      path: optStr(null, 'Hugging Face directory of the actor (the reference is its frozen copy); null: the built-in tiny Qwen3-style model'),
      custom_chat_template: optStr(null, 'Jinja chat template replacing the tokenizer\'s (saved with checkpoints); \'{{ messages[-1].content }}\' feeds a base model the prompt as plain text'),
      enable_gradient_checkpointing: bool(false, 'Activation recomputation: keep only each layer\'s input in the forward, recompute the layer in backward (same gradients, about a third more compute); verl defaults to true, here false: on this engine\'s usual devices compute is scarcer than memory'),
    },
    actor: {
      ppo_mini_batch_size: int(256, 'Prompts per optimizer step (× rollout.n sequences)', positive),
      ppo_micro_batch_size: optInt(null, 'Deprecated spelling of ppo_micro_batch_size_per_gpu (one device here)', positive),
      ppo_micro_batch_size_per_gpu: optInt(null, 'Sequences per forward/backward; smaller than the mini-batch accumulates gradients; null: the whole mini-batch', positive),
      use_dynamic_bsz: bool(false, 'Form micro-batches by a token budget (ppo_max_token_len_per_gpu) instead of ppo_micro_batch_size_per_gpu: similar lengths together, each padded only to its own longest sequence'),
      ppo_max_token_len_per_gpu: int(16384, 'use_dynamic_bsz: tokens per micro-batch, padding included (rows × (longest prompt + longest response))', positive),
      ppo_epochs: int(1, 'Passes over each rollout batch', positive),
      shuffle: bool(false, 'Shuffle sequences across mini-batches every PPO epoch'),
      grad_clip: float(1.0, 'Clip the global gradient norm to this', positive),
      clip_ratio: float(0.2, 'PPO clip ε for both sides unless clip_ratio_low / clip_ratio_high are set', openUnitInterval),
      clip_ratio_low: optFloat(null, 'Lower clip: ratio ≥ 1 − clip_ratio_low; null: clip_ratio', openUnitInterval),
      clip_ratio_high: optFloat(null, 'Upper clip: ratio ≤ 1 + clip_ratio_high; null: clip_ratio', positive),
      clip_ratio_c: float(3.0, 'Dual-clip PPO: bound of the loss for negative advantages, > 1', { what: 'greater than 1', test: (v) => v > 1 }),
      loss_agg_mode: oneOf('token-mean', LOSS_AGG_MODES, 'How token losses become one loss'),
      entropy_coeff: float(0, 'Entropy bonus coefficient'),
      use_kl_loss: bool(false, 'Add a KL-to-reference loss term (as GRPO does)'),
      kl_loss_coef: float(0.001, 'Coefficient of the KL loss term', nonNegative),
      kl_loss_type: str('low_var_kl', `KL estimator of the loss term: ${KL_ESTIMATOR_HELP}`),
      policy_loss: {
        loss_mode: oneOf('vanilla', ['vanilla', 'gspo'], 'Policy loss: token-level clipped PPO (vanilla) or sequence-level GSPO'),
      },
      optim: optimizerKeys(1e-6),
    },
    rollout: {
      n: int(1, 'Responses sampled per prompt (> 1 for GRPO, RLOO, …)', positive),
      temperature: float(1.0, 'Sampling temperature', nonNegative),
      top_k: int(-1, 'Keep the k most likely tokens; -1 or 0: all', { what: '≥ -1', test: (v) => v >= -1 }),
      top_p: float(1, 'Nucleus sampling mass', probability),
      do_sample: bool(true, 'Sample; false: greedy'),
      gpu_memory_utilization: float(0.5, 'Fraction of the device memory generation may take (KV caches, activations, logits); WebGPU reports no device memory, so of an assumed 4 GiB', { what: 'in (0, 1]', test: (v) => v > 0 && v <= 1 }),
      log_prob_micro_batch_size_per_gpu: optInt(null, 'Sequences per forward when recomputing old log-probs; null: all at once', positive),
      log_prob_use_dynamic_bsz: bool(false, 'Log-prob forwards by a token budget (the reference\'s default; old log-probs come from the sampler here)'),
      log_prob_max_token_len_per_gpu: int(16384, 'log_prob_use_dynamic_bsz: tokens per forward, padding included', positive),
      val_kwargs: {
        n: int(1, 'Responses per validation prompt', positive),
        temperature: float(0, 'Validation sampling temperature', nonNegative),
        top_k: int(-1, 'Validation top-k; -1 or 0: all', { what: '≥ -1', test: (v) => v >= -1 }),
        top_p: float(1.0, 'Validation nucleus mass', probability),
        do_sample: bool(false, 'Sample during validation; false: greedy'),
      },
    },
    ref: {
      log_prob_micro_batch_size_per_gpu: optInt(null, 'Sequences per forward of the reference model; null: all at once', positive),
      log_prob_use_dynamic_bsz: bool('${actor_rollout_ref.rollout.log_prob_use_dynamic_bsz}', 'Reference forwards by a token budget instead of log_prob_micro_batch_size_per_gpu'),
      log_prob_max_token_len_per_gpu: int('${actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu}', 'log_prob_use_dynamic_bsz: tokens per reference forward, padding included', positive),
    },
  },
  critic: {
    model: {
      path: optStr('${actor_rollout_ref.model.path}', 'Hugging Face directory the critic starts from (a value head is added when it has none)'),
      enable_gradient_checkpointing: bool(false, 'Activation recomputation: keep only each layer\'s input in the forward, recompute the layer in backward (same gradients, about a third more compute); verl defaults to true, here false: on this engine\'s usual devices compute is scarcer than memory'),
    },
    optim: optimizerKeys(1e-5),
    ppo_mini_batch_size: int('${actor_rollout_ref.actor.ppo_mini_batch_size}', 'Prompts per critic optimizer step (× rollout.n sequences)', positive),
    ppo_micro_batch_size: optInt(null, 'Deprecated spelling of ppo_micro_batch_size_per_gpu (one device here)', positive),
    ppo_micro_batch_size_per_gpu: optInt(null, 'Sequences per critic forward/backward; null: the whole mini-batch', positive),
    forward_micro_batch_size_per_gpu: optInt('${critic.ppo_micro_batch_size_per_gpu}', 'Sequences per critic forward when computing values; null: all at once', positive),
    use_dynamic_bsz: bool('${actor_rollout_ref.actor.use_dynamic_bsz}', 'Critic micro-batches and value forwards by a token budget'),
    ppo_max_token_len_per_gpu: int(32768, 'use_dynamic_bsz: tokens per critic micro-batch, padding included', positive),
    forward_max_token_len_per_gpu: int('${critic.ppo_max_token_len_per_gpu}', 'use_dynamic_bsz: tokens per value forward, padding included', positive),
    ppo_epochs: int('${actor_rollout_ref.actor.ppo_epochs}', 'Critic passes over each rollout batch', positive),
    shuffle: bool('${actor_rollout_ref.actor.shuffle}', 'Shuffle sequences across critic mini-batches'),
    grad_clip: float(1.0, 'Clip the critic\'s global gradient norm to this', positive),
    cliprange_value: float(0.5, 'Clip new values to old values ± this in the value loss', positive),
    loss_agg_mode: oneOf('${actor_rollout_ref.actor.loss_agg_mode}', LOSS_AGG_MODES, 'How token value losses become one loss'),
    freeze: bool(false, 'Compute values but never update the critic'),
  },
  reward_model: {
    enable: bool(false, 'Score responses with a neural reward model instead of the rule reward'),
    model: {
      path: optStr(null, 'Hugging Face *ForSequenceClassification directory'),
    },
    micro_batch_size_per_gpu: optInt(null, 'Sequences per reward-model forward; null: all at once', positive),
  },
  custom_reward_function: {
    path: optStr(null, 'JS/TS module with a reward function (data_source, solution_str, ground_truth, extra_info) → number | {score, …}'),
    name: str('compute_score', 'Name of the function the module exports'),
    timeout: float(300, 'Seconds one reward call may take; past it the run stops, naming the call (a reward that never settles)', positive),
  },
  algorithm: {
    gamma: float(1.0, 'Discount factor', unitInterval),
    lam: float(1.0, 'GAE λ', unitInterval),
    adv_estimator: oneOf('gae', ADV_ESTIMATORS, 'Advantage estimator; only gae uses a critic'),
    norm_adv_by_std_in_grpo: bool(true, 'GRPO: divide by the group\'s standard deviation (false: Dr. GRPO)'),
    use_kl_in_reward: bool(false, 'Subtract β·KL(actor‖reference) from the token rewards'),
    kl_penalty: str('kl', `KL estimator of the in-reward penalty: ${KL_ESTIMATOR_HELP}`),
    kl_ctrl: {
      type: oneOf('fixed', ['fixed', 'adaptive'], 'KL coefficient controller'),
      kl_coef: float(0.001, 'Initial β', nonNegative),
      horizon: int(10000, 'adaptive: steps over which β adapts', positive),
      target_kl: float(0.1, 'adaptive: the KL β steers towards', positive),
    },
    reward_mask_ratio: float(0, 'Fraction of trajectories whose reward is zeroed (seeded draw per trajectory)', unitInterval),
  },
  do_search: bool(false, 'Search-R1 multi-turn rollouts: <search>query</search> → retriever → <information>…</information>, until <answer>'),
  max_turns: int(2, 'do_search: turns whose search is executed; a last turn follows in which the model must answer', positive),
  retriever: {
    url: optStr(null, 'Search-R1 retrieval server (POST {queries, topk, return_scores}); null: the built-in BM25 over retriever.corpus_path'),
    topk: int(3, 'Documents per search', positive),
    corpus_path: optStr(null, 'JSONL corpus ({"id", "contents"} per line, first line of contents the title) for the built-in BM25; null: the built-in task\'s corpus'),
    timeout: float(10, 'Seconds to wait for the retrieval server per attempt', positive),
    max_retries: int(3, 'Retries of a failed retrieval request before the run stops', nonNegative),
  },
  trainer: {
    total_epochs: int(30, 'Passes over the training prompts', positive),
    total_training_steps: optInt(null, 'Stop after this many steps; null: total_epochs × steps per epoch', positive),
    project_name: str('verl_examples', 'Project name (part of default_local_dir)'),
    experiment_name: str('gsm8k', 'Experiment name (part of default_local_dir)'),
    logger: new Key<string[]>('strings', ['console', 'file'], 'Metric sinks: console (progress line), file (metrics.jsonl in the run directory)', false, null, ['console', 'file']),
    val_before_train: bool(true, 'Validate once before the first step'),
    test_freq: int(-1, 'Validate every this many steps; ≤ 0: never'),
    save_freq: int(-1, 'Checkpoint every this many steps; ≤ 0: never'),
    critic_warmup: int(0, 'First steps that update only the critic', nonNegative),
    default_local_dir: str('checkpoints/${trainer.project_name}/${trainer.experiment_name}', 'Run directory: global_step_N checkpoints, metrics.jsonl, charts'),
    resume_mode: oneOf('auto', ['auto', 'disable', 'resume_path'], 'auto: continue from the latest checkpoint in default_local_dir; disable: start fresh; resume_path: from resume_from_path'),
    resume_from_path: optStr(null, 'A global_step_N directory to resume from (with resume_mode=resume_path)'),
    max_actor_ckpt_to_keep: optInt(null, 'Keep only the newest N actor checkpoints; null: all', positive),
    max_critic_ckpt_to_keep: optInt(null, 'Keep only the newest N critic checkpoints; null: all', positive),
    save_dtype: oneOf('auto', ['auto', 'float32', 'bfloat16', 'float16'], 'Dtype of saved model weights; auto: the torch_dtype the model came in (bf16 in, bf16 out: half the size; resuming then continues from bf16-rounded weights), float32 for exact resumes'),
    seed: int(1, 'Seed of built-in model initialisation, sampling and reward masking'),
  },
};

type ConfigOf<S> = { [K in keyof S]: S[K] extends Key<infer T> ? T : ConfigOf<S[K]> };

/** The resolved, validated configuration (verl's key names). */
export type PpoConfig = ConfigOf<typeof SCHEMA>;

export class ConfigError extends Error {
  override name = 'ConfigError';

  constructor(readonly problems: string[]) {
    super(problems.length === 1 ? problems[0] : `${problems.length} problems in the configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

type Group = { [name: string]: Key<unknown> | Group };

function collectKeys(group: Group, prefix = '', out = new Map<string, Key<unknown>>()): Map<string, Key<unknown>> {
  for (const [name, node] of Object.entries(group)) {
    const path = prefix ? `${prefix}.${name}` : name;
    if (node instanceof Key) out.set(path, node);
    else collectKeys(node, path, out);
  }
  return out;
}

const KEYS = collectKeys(SCHEMA);
const GROUPS = new Set([...KEYS.keys()].flatMap((path) => path.split('.').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('.'))));

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

function closest(word: string, candidates: Iterable<string>): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = editDistance(word, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

/** The key a user most likely meant: the nearest full path, unless only the group is wrong and the leaf name exists elsewhere. */
function suggestKey(path: string): string | null {
  const nearest = closest(path, [...KEYS.keys(), ...GROUPS]);
  const leaf = path.slice(path.lastIndexOf('.') + 1);
  const sameLeaf = [...KEYS.keys()].filter((k) => k.endsWith(`.${leaf}`) || k === leaf);
  if (nearest !== null && editDistance(path, nearest) <= Math.max(2, Math.floor(path.length / 4))) return nearest;
  if (sameLeaf.length > 0) return sameLeaf.join(' or ');
  return nearest;
}

function unknownKey(path: string, origin: string): string {
  const suggestion = suggestKey(path);
  return `unknown key ${path} (${origin})${suggestion ? ` — did you mean ${suggestion}?` : ''}`;
}

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(show).join(', ')}]`;
  if (value !== null && typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Raw (unresolved, unchecked) values by full key path, with where each came from. */
type RawValues = Map<string, { value: unknown; origin: string }>;

function assign(raw: RawValues, path: string, value: unknown, origin: string, problems: string[]): void {
  if (KEYS.has(path)) {
    raw.set(path, { value, origin });
  } else if (GROUPS.has(path)) {
    if (!isMapping(value)) {
      const members = [...KEYS.keys()].filter((k) => k.startsWith(`${path}.`)).slice(0, 3);
      problems.push(`${path} (${origin}) is a group of keys (${members.join(', ')}, …), not a value: got ${show(value)}`);
      return;
    }
    for (const [name, member] of Object.entries(value)) assign(raw, `${path}.${name}`, member, origin, problems);
  } else {
    problems.push(unknownKey(path, origin));
  }
}

/**
 * A command-line value as Hydra reads it: numbers, true/false, null, [lists], {maps}, quoted or plain strings.
 * YAML's flow syntax is that grammar; an empty value is the empty string, as in Hydra.
 */
function parseOverrideValue(text: string, override: string): unknown {
  if (text.trim() === '') return '';
  try {
    return parseYaml(text);
  } catch (err) {
    throw new ConfigError([`cannot parse the value of override ${JSON.stringify(override)}: ${(err as Error).message.split('\n')[0]}`]);
  }
}

function parseOverride(override: string): { path: string; value: unknown } {
  const eq = override.indexOf('=');
  if (eq <= 0) throw new ConfigError([`override ${JSON.stringify(override)} is not key.sub=value`]);
  // Hydra's + (add) and ++ (force add) prefixes: every key already exists here, so both simply set it.
  const path = override.slice(0, eq).trim().replace(/^\+\+?/, '');
  if (path.startsWith('~')) throw new ConfigError([`override ${JSON.stringify(override)}: deleting keys (~) is not supported; every key has a default`]);
  return { path, value: parseOverrideValue(override.slice(eq + 1), override) };
}

const INTERPOLATION = /\$\{([^}]*)\}/g;

/** Resolves `${a.b}` references (whole-value references keep the referenced value's type). */
function resolveInterpolations(raw: RawValues, problems: string[]): Map<string, unknown> {
  const resolved = new Map<string, unknown>();
  const resolving = new Set<string>();
  const failed = Symbol('failed');

  const resolve = (path: string): unknown => {
    if (resolved.has(path)) return resolved.get(path);
    const { value, origin } = raw.get(path)!;
    if (typeof value !== 'string' || !value.includes('${')) {
      resolved.set(path, value);
      return value;
    }
    if (resolving.has(path)) {
      problems.push(`${path} (${origin}): interpolation cycle through ${[...resolving].join(' → ')} → ${path}`);
      return failed;
    }
    resolving.add(path);
    const lookup = (ref: string): unknown => {
      if (!KEYS.has(ref)) {
        problems.push(`${path} (${origin}): interpolation \${${ref}} names an ${unknownKey(ref, 'interpolation')}`);
        return failed;
      }
      return resolve(ref);
    };
    const whole = /^\$\{([^}]*)\}$/.exec(value);
    let result: unknown;
    if (whole) {
      result = lookup(whole[1]);
    } else {
      const parts = [...value.matchAll(INTERPOLATION)].map((m) => lookup(m[1]));
      let i = 0;
      result = parts.includes(failed) ? failed : value.replace(INTERPOLATION, () => String(parts[i++]));
    }
    resolving.delete(path);
    resolved.set(path, result);
    return result;
  };

  for (const path of KEYS.keys()) resolve(path);
  for (const [path, value] of resolved) if (value === failed) resolved.delete(path);
  return resolved;
}

/** The key whose value this key copies whole (`${other.key}`), if it does. */
function referencedKey(raw: RawValues, path: string): string | null {
  const value = raw.get(path)!.value;
  const whole = typeof value === 'string' ? /^\$\{([^}]*)\}$/.exec(value) : null;
  return whole && KEYS.has(whole[1]) ? whole[1] : null;
}

const EXPECTED: Record<Kind, string> = {
  int: 'an integer',
  float: 'a number',
  bool: 'true or false',
  string: 'a string',
  strings: 'a list of strings',
  floats: 'a list of numbers',
  files: 'a file path or a list of file paths',
};

/** Numbers may arrive as strings from a quoted YAML value, as OmegaConf accepts for numeric nodes. */
function asNumber(value: unknown): number | null {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return null;
}

/** The value converted to the key's type, or the phrase of what was expected. */
function coerce(key: Key<unknown>, value: unknown): { value: unknown } | { expected: string } {
  if (value === null) return key.nullable ? { value: null } : { expected: EXPECTED[key.kind] };
  switch (key.kind) {
    case 'int': {
      const n = asNumber(value);
      return n !== null && Number.isInteger(n) ? { value: n } : { expected: EXPECTED.int };
    }
    case 'float': {
      const n = asNumber(value);
      return n !== null && Number.isFinite(n) ? { value: n } : { expected: EXPECTED.float };
    }
    case 'bool':
      return typeof value === 'boolean' ? { value } : { expected: EXPECTED.bool };
    case 'string':
      if (typeof value === 'number') return { value: String(value) };
      return typeof value === 'string' ? { value } : { expected: EXPECTED.string };
    case 'files':
      if (typeof value === 'string') return { value };
      return Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string') ? { value } : { expected: EXPECTED.files };
    case 'strings':
      return Array.isArray(value) && value.every((v) => typeof v === 'string') ? { value } : { expected: EXPECTED.strings };
    case 'floats': {
      const numbers = Array.isArray(value) ? value.map(asNumber) : null;
      return numbers && numbers.every((n) => n !== null && Number.isFinite(n)) ? { value: numbers } : { expected: EXPECTED.floats };
    }
  }
}

function checkValue(path: string, key: Key<unknown>, value: unknown, origin: string, problems: string[]): unknown {
  const result = coerce(key, value);
  if ('expected' in result) {
    problems.push(`${path} (${origin}): expected ${result.expected}${key.nullable ? ' or null' : ''}, got ${show(value)}`);
    return undefined;
  }
  const v = result.value;
  if (key.range && typeof v === 'number' && !key.range.test(v)) problems.push(`${path} (${origin}) must be ${key.range.what}, got ${v}`);
  if (key.choices) {
    for (const choice of Array.isArray(v) ? v : [v]) {
      if (typeof choice === 'string' && !key.choices.includes(choice)) {
        problems.push(`${path} (${origin}): unknown value ${show(choice)} — did you mean ${closest(choice, key.choices)}? (expected one of ${key.choices.join(', ')})`);
      }
    }
  }
  return v;
}

function buildTree(values: Map<string, unknown>): PpoConfig {
  const root: Record<string, unknown> = {};
  for (const path of KEYS.keys()) {
    const parts = path.split('.');
    let node = root;
    for (const part of parts.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>;
    node[parts[parts.length - 1]] = values.get(path);
  }
  return root as PpoConfig;
}

interface MiniBatchKeys {
  ppo_mini_batch_size: number;
  ppo_micro_batch_size: number | null;
  ppo_micro_batch_size_per_gpu: number | null;
}

/** Effective micro-batch of an actor or critic section: the _per_gpu key, its deprecated alias, or the whole mini-batch. */
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

/** Whether this configuration trains with a critic (verl: only GAE uses one). */
export function usesCritic(config: PpoConfig): boolean {
  return config.algorithm.adv_estimator === 'gae';
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
      problems.push(`${name}.ppo_micro_batch_size and ${name}.ppo_micro_batch_size_per_gpu are mutually exclusive: remove ${name}.ppo_micro_batch_size (deprecated)`);
    }
    if (prompts % mini !== 0) {
      // The critic's mini-batch follows the actor's by default: one message for one mistake.
      const reportedForActor = name === 'critic' && mini === config.actor_rollout_ref.actor.ppo_mini_batch_size;
      if (!reportedForActor) problems.push(`${name}.ppo_mini_batch_size=${mini} (× rollout.n=${n} = ${mini * n} sequences) must divide data.train_batch_size × rollout.n = ${prompts * n}` +
        ` — try ${name}.ppo_mini_batch_size=${divisorBelow(prompts, mini)}`);
      continue;
    }
    const micro = microBatchSize(section, mini * n);
    if ((mini * n) % micro !== 0) {
      problems.push(`${name}.ppo_micro_batch_size_per_gpu=${micro} must divide the mini-batch of ${mini * n} sequences (ppo_mini_batch_size ${mini} × rollout.n ${n})` +
        ` — try ${name}.ppo_micro_batch_size_per_gpu=${divisorBelow(mini * n, micro)}`);
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

/** Estimators whose baseline comes from the other samples of the same prompt. */
const GROUP_ESTIMATORS = new Set(['grpo', 'rloo', 'opo', 'grpo_passk', 'reinforce_plus_plus_baseline']);

function checkCombinations(config: PpoConfig, problems: string[]): void {
  const { actor, rollout, model } = config.actor_rollout_ref;
  const { algorithm, critic, trainer } = config;
  checkBatchSizes(config, problems);
  checkKlEstimator('algorithm.kl_penalty', algorithm.kl_penalty, problems);
  checkKlEstimator('actor_rollout_ref.actor.kl_loss_type', actor.kl_loss_type, problems);

  const estimator = algorithm.adv_estimator;
  if (usesCritic(config)) {
    if (critic.model.path === null && model.path !== null) {
      problems.push(`algorithm.adv_estimator=gae trains a critic, but critic.model.path is null — set critic.model.path (e.g. to ${model.path}) or use a critic-free estimator such as algorithm.adv_estimator=grpo`);
    }
    if (critic.freeze && trainer.critic_warmup > 0) {
      problems.push(`trainer.critic_warmup=${trainer.critic_warmup} updates only the critic, but critic.freeze=true: nothing would train — set trainer.critic_warmup=0 or critic.freeze=false`);
    }
  } else {
    if (critic.freeze) problems.push(`critic.freeze=true but algorithm.adv_estimator=${estimator} uses no critic — remove critic.freeze or use algorithm.adv_estimator=gae`);
    if (trainer.critic_warmup > 0) problems.push(`trainer.critic_warmup=${trainer.critic_warmup} but algorithm.adv_estimator=${estimator} uses no critic — set trainer.critic_warmup=0`);
  }
  if (GROUP_ESTIMATORS.has(estimator) && rollout.n < 2) {
    problems.push(`algorithm.adv_estimator=${estimator} compares the responses to one prompt, but actor_rollout_ref.rollout.n=${rollout.n} — set actor_rollout_ref.rollout.n to 2 or more (e.g. 4)`);
  }

  for (const [path, sampling] of [['actor_rollout_ref.rollout', rollout], ['actor_rollout_ref.rollout.val_kwargs', rollout.val_kwargs]] as const) {
    if (!sampling.do_sample && sampling.n > 1) {
      problems.push(`${path}.n=${sampling.n} with ${path}.do_sample=false: greedy decoding gives ${sampling.n} identical responses — set ${path}.do_sample=true or ${path}.n=1`);
    }
    if (sampling.do_sample && sampling.temperature === 0) {
      problems.push(`${path}.do_sample=true with ${path}.temperature=0: sampling needs a positive temperature — set ${path}.do_sample=false for greedy decoding`);
    }
  }

  if (config.reward_model.enable && config.reward_model.model.path === null) {
    problems.push('reward_model.enable=true but reward_model.model.path is null — set it to a Hugging Face *ForSequenceClassification directory');
  }
  if (config.reward_model.enable && config.custom_reward_function.path !== null) {
    problems.push('reward_model.enable=true scores with the reward model, so custom_reward_function.path would be ignored — use one of them');
  }

  const { retriever } = config;
  if (config.do_search) {
    if (retriever.url !== null && retriever.corpus_path !== null) {
      problems.push('retriever.url and retriever.corpus_path are both set: the run would search the server and ignore the corpus — set one of them');
    }
    if (retriever.url === null && retriever.corpus_path === null && (config.data.train_files !== null || config.data.builtin_task !== 'search_qa')) {
      problems.push('do_search=true needs a retriever: set retriever.url (a Search-R1 retrieval server) or retriever.corpus_path (a JSONL corpus for the built-in BM25)');
    }
  } else {
    if (retriever.url !== null || retriever.corpus_path !== null) {
      problems.push(`retriever.${retriever.url !== null ? 'url' : 'corpus_path'} is set but do_search=false: no search would run — set do_search=true`);
    }
    if (config.data.train_files === null && config.data.builtin_task === 'search_qa') {
      problems.push('data.builtin_task=search_qa is a search task — set do_search=true');
    }
  }

  if (trainer.resume_mode === 'resume_path') {
    if (trainer.resume_from_path === null) problems.push('trainer.resume_mode=resume_path needs trainer.resume_from_path (a global_step_N directory)');
    else if (!/global_step_\d+\/?$/.test(trainer.resume_from_path)) problems.push(`trainer.resume_from_path must name a global_step_N directory, got ${show(trainer.resume_from_path)}`);
  } else if (trainer.resume_from_path !== null) {
    problems.push(`trainer.resume_from_path is set but trainer.resume_mode=${trainer.resume_mode} ignores it — set trainer.resume_mode=resume_path`);
  }

  for (const [path, betas] of [['actor_rollout_ref.actor.optim.betas', actor.optim.betas], ['critic.optim.betas', critic.optim.betas]] as const) {
    if (betas.length !== 2 || !betas.every((b) => b >= 0 && b < 1)) problems.push(`${path} must be two numbers in [0, 1), got ${show(betas)}`);
  }
}

export interface LoadConfigOptions {
  /** Contents of the --config YAML file. */
  yamlText?: string;
  /** Where yamlText came from, for error messages (default "config file"). */
  yamlSource?: string;
  /** `key.sub=value` strings, applied after the YAML file in order. */
  overrides?: readonly string[];
}

/** Defaults ← YAML file ← overrides, interpolated and validated; throws ConfigError listing every problem. */
export function loadConfig({ yamlText, yamlSource = 'config file', overrides = [] }: LoadConfigOptions = {}): PpoConfig {
  const problems: string[] = [];
  const raw: RawValues = new Map([...KEYS].map(([path, key]) => [path, { value: key.defaultValue, origin: 'default' }]));

  if (yamlText !== undefined) {
    let document: unknown;
    try {
      document = parseYaml(yamlText);
    } catch (err) {
      throw new ConfigError([`${yamlSource}: not valid YAML: ${(err as Error).message}`]);
    }
    if (document !== null && document !== undefined) {
      if (!isMapping(document)) throw new ConfigError([`${yamlSource}: expected a mapping of config keys at the top level, got ${show(document)}`]);
      for (const [name, value] of Object.entries(document)) assign(raw, name, value, yamlSource, problems);
    }
  }
  for (const override of overrides) {
    const { path, value } = parseOverride(override);
    assign(raw, path, value, 'command line', problems);
  }

  const resolved = resolveInterpolations(raw, problems);
  const values = new Map<string, unknown>();
  const valid = new Map<string, boolean>();
  // A key that copies another whole (verl's critic.ppo_epochs: ${actor_rollout_ref.actor.ppo_epochs}) is checked
  // after it and stays quiet when that one was already reported: one message for one mistake.
  const check = (path: string): boolean => {
    if (valid.has(path)) return valid.get(path)!;
    valid.set(path, false);
    const source = referencedKey(raw, path);
    const sourceValid = source === null || check(source);
    if (!resolved.has(path)) return false;
    const before = problems.length;
    values.set(path, checkValue(path, KEYS.get(path)!, resolved.get(path), raw.get(path)!.origin, problems));
    if (!sourceValid) problems.length = before;
    valid.set(path, sourceValid && problems.length === before);
    return valid.get(path)!;
  };
  for (const path of KEYS.keys()) check(path);
  if (problems.length > 0) throw new ConfigError(problems);

  const config = buildTree(values);
  checkCombinations(config, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

function showDefault(value: unknown): string {
  if (typeof value === 'string') return value === '' ? '""' : value;
  if (Array.isArray(value)) return `[${value.map(showDefault).join(', ')}]`;
  return String(value);
}

/** Every key with its default and meaning, grouped as in the YAML file (for `node train.js --help`). */
export function formatHelp(): string {
  const lines = ['Configuration keys (set in a --config YAML file or as key.sub=value; later wins):'];
  let group = '';
  for (const [path, key] of KEYS) {
    const dot = path.lastIndexOf('.');
    const parent = path.slice(0, dot);
    if (parent !== group) {
      lines.push('', `${parent}:`);
      group = parent;
    }
    const choices = key.choices && key.kind === 'string' ? ` (${key.choices.join(' | ')})` : '';
    lines.push(`  ${path.slice(dot + 1)} = ${showDefault(key.defaultValue)}`, `      ${key.help}${choices}`);
  }
  return lines.join('\n');
}
