// Hydra/OmegaConf-style composition of the configuration: the schema's defaults (verl's), then YAML layers in order (a
// built-in job, a --config file; Hydra's `defaults:` list and `hydra:` block are skipped), then `key.sub=value`
// overrides with Hydra's grammar (`+key=`, `++key=`, `~key`, `1_024`, `inf`, a bare string for a list of one), then
// aliases over their targets, `${a.b}`, `${.sibling}`, `${oc.select:key,default}` and `${oc.env:VAR,default}`
// interpolation, types, ranges and cross-key checks. Every problem is reported at once. Browser-safe: the caller reads
// files and passes the environment.
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { KEYS, GROUPS, VERL_FOLLOWED, type Key, type Kind, type PpoConfig } from './schema.ts';
import { ConfigError, show, closeMatches, suggestKeys } from './errors.ts';
import { compatKey, HYDRA_BLOCKS, isLegacyNullUnset } from './verl-compat.ts';
import { checkCombinations, deriveDefaults, usesPfPpo } from './checks.ts';

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Raw (unresolved, unchecked) values by full key path, with where each came from. */
type RawValues = Map<string, { value: unknown; origin: string }>;

/** Everything set on top of the schema's defaults, collected layer by layer. */
interface Layers {
  raw: RawValues;
  /** Aliases seen, applied over their targets once every layer is in. */
  aliases: Map<string, { from: string; value: unknown; origin: string; weak?: boolean; when?: string }>;
  /** The last value written to each alias's own path (a conditional alias reads its condition here). */
  aliasSources: Map<string, unknown>;
  /** Keys accepted without effect, with why. */
  ignored: Map<string, string>;
  problems: string[];
}

/** The map-kind key (distillation.teacher_models) that holds `path` as `<map>.<name>[.<member>…]`, if one does. */
function mapKeyOf(path: string): string | null {
  for (const [mapPath, key] of KEYS)
    if (key.kind === 'map' && (path === mapPath || path.startsWith(`${mapPath}.`))) return mapPath;
  return null;
}

/** Sets one member of one named entry of a map key, or the entries of a mapping, as Hydra merges them. */
function assignMapEntry(layers: Layers, mapPath: string, path: string, value: unknown, origin: string): boolean {
  const key = KEYS.get(mapPath)!;
  const [name, member, ...rest] = path.slice(mapPath.length + 1).split('.');
  if (path === mapPath || member === undefined) {
    if (!isMapping(value)) return false;
    for (const [child, v] of Object.entries(value)) assign(layers, `${path}.${child}`, v, origin);
    return true;
  }
  if (rest.length > 0 || !(member in key.entry!)) return false;
  const current = layers.raw.get(mapPath)!;
  const entries = structuredClone(current.value) as Record<string, Record<string, unknown>>;
  entries[name] = { ...(entries[name] ?? {}), [member]: value };
  layers.raw.set(mapPath, { value: entries, origin: current.origin === 'default' ? origin : current.origin });
  return true;
}

function assign(layers: Layers, path: string, value: unknown, origin: string): void {
  const { raw, problems } = layers;
  const mapPath = mapKeyOf(path);
  if (mapPath !== null && assignMapEntry(layers, mapPath, path, value, origin)) return;
  // verl 1dda039b writes every key of the legacy reward trees as null, meaning "not set" (its
  // migrate_legacy_reward_impl reads reward.* then): the key stays at its default, and a reward.* alias may set it.
  if (value === null && isLegacyNullUnset(path) && (KEYS.has(path) || compatKey(path) !== null)) {
    if (KEYS.has(path)) raw.set(path, { value: KEYS.get(path)!.defaultValue, origin: 'default' });
    return;
  }
  if (KEYS.has(path)) {
    raw.set(path, { value, origin });
    return;
  }
  if (GROUPS.has(path) && !isMapping(value)) {
    const members = [...KEYS.keys()].filter((k) => k.startsWith(`${path}.`)).slice(0, 3);
    problems.push(`${path} (${origin}) is a group of keys (${members.join(', ')}, …), not a value: got ${show(value)}`);
    return;
  }
  if (isMapping(value) && (GROUPS.has(path) || compatKey(path) === null)) {
    for (const [name, member] of Object.entries(value)) assign(layers, `${path}.${name}`, member, origin);
    return;
  }
  const compat = compatKey(path);
  if (compat === null) {
    const suggestions = suggestKeys(path, KEYS.keys());
    problems.push(
      `unknown key ${path} (${origin})${suggestions.length > 0 ? ` — did you mean ${suggestions.join(' or ')}?` : ''}`,
    );
  } else if (compat.kind === 'alias') {
    layers.aliasSources.set(path, value);
    const aliased = compat.value ? compat.value(value) : value;
    if (aliased !== undefined)
      layers.aliases.set(compat.to, { from: path, value: aliased, origin, weak: compat.weak, when: compat.when });
    // A later "not set" (null) of the same spelling takes back what an earlier layer set through it.
    else if (layers.aliases.get(compat.to)?.from === path) layers.aliases.delete(compat.to);
  } else if (compat.kind === 'only') {
    if (!sameValue(value, compat.value))
      problems.push(
        `${path}=${show(value)} (${origin}) cannot be honoured: ${compat.reason} — remove it or set ` +
          `${path}=${show(compat.value)}`,
      );
  } else if (compat.kind === 'default') {
    if (!sameValue(value, compat.value))
      problems.push(
        `${path}=${show(value)} (${origin}): this verl feature is not implemented here; only verl's default ` +
          `${show(compat.value)} is accepted — remove it`,
      );
  } else if (compat.kind === 'ignored') {
    layers.ignored.set(path, compat.reason);
  }
}

/** YAML and the command line spell booleans and numbers several ways (True, "1"): compare what they mean. */
function sameValue(value: unknown, expected: unknown): boolean {
  if (typeof expected === 'boolean')
    return value === expected || (typeof value === 'string' && value.toLowerCase() === String(expected));
  if (typeof expected === 'number') return asNumber(value) === expected;
  if (isMapping(expected)) return isMapping(value) && JSON.stringify(value) === JSON.stringify(expected);
  return value === expected;
}

function removeKey(layers: Layers, path: string, origin: string): void {
  const mapPath = mapKeyOf(path);
  if (mapPath !== null && path !== mapPath) {
    const [name, member] = path.slice(mapPath.length + 1).split('.');
    const entries = structuredClone(layers.raw.get(mapPath)!.value) as Record<string, Record<string, unknown>>;
    if (!(name in entries)) layers.problems.push(`~${path} (${origin}): no such key to delete`);
    else if (member === undefined) delete entries[name];
    else delete entries[name][member];
    layers.raw.set(mapPath, { value: entries, origin: `${origin}, deleted` });
    return;
  }
  const matched = [...KEYS.keys()].filter((k) => k === path || k.startsWith(`${path}.`));
  for (const key of matched) layers.raw.set(key, { value: KEYS.get(key)!.defaultValue, origin: `${origin}, deleted` });
  let found = matched.length > 0;
  for (const [target, alias] of layers.aliases) {
    if (alias.from === path || alias.from.startsWith(`${path}.`)) {
      layers.aliases.delete(target);
      found = true;
    }
  }
  for (const key of layers.ignored.keys()) {
    if (key === path || key.startsWith(`${path}.`)) {
      layers.ignored.delete(key);
      found = true;
    }
  }
  // A verl key accepted beside the schema exists in verl's config even when unset here: deleting it is no error.
  if (!found && compatKey(path) === null) layers.problems.push(`~${path} (${origin}): no such key to delete`);
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
    throw new ConfigError([
      `cannot parse the value of override ${JSON.stringify(override)}: ${(err as Error).message.split('\n')[0]}`,
    ]);
  }
}

/**
 * `key=value`, Hydra's `+key=value` / `++key=value` (add; every key already exists here, so they set it) and `~key`
 * (delete).
 */
function parseOverride(override: string): { path: string; value: unknown; remove: boolean } {
  if (override.startsWith('~')) {
    const eq = override.indexOf('=');
    return { path: override.slice(1, eq < 0 ? undefined : eq).trim(), value: undefined, remove: true };
  }
  const eq = override.indexOf('=');
  if (eq <= 0) throw new ConfigError([`override ${JSON.stringify(override)} is not key.sub=value`]);
  const path = override
    .slice(0, eq)
    .trim()
    .replace(/^\+\+?/, '');
  return { path, value: parseOverrideValue(override.slice(eq + 1), override), remove: false };
}

const INTERPOLATION = /\$\{([^}]*)\}/g;

/** `${oc.env:VAR}` or `${oc.env:VAR,default}`: the environment variable, else the default, else an error. */
function envValue(
  ref: string,
  env: Readonly<Record<string, string | undefined>>,
): { value: string } | { missing: string } | null {
  const m = /^oc\.env:([^,]+)(?:,(.*))?$/.exec(ref);
  if (!m) return null;
  const name = m[1].trim();
  const value = env[name];
  if (value !== undefined) return { value };
  if (m[2] !== undefined) return { value: m[2].trim().replace(/^(['"])(.*)\1$/, '$2') };
  return { missing: name };
}

/** OmegaConf's relative reference: `.x` is a sibling of `from`, `..x` a sibling of its group, and so on. */
function absolutePath(ref: string, from: string): string {
  const dots = /^\.*/.exec(ref)![0].length;
  if (dots === 0) return ref;
  return [...from.split('.').slice(0, -dots), ref.slice(dots)].join('.');
}

/**
 * Resolves `${a.b}` and relative `${.b}` references (whole-value references keep the referenced value's type),
 * `${oc.env:…}` and `${oc.select:key,default}`.
 */
function resolveInterpolations(
  raw: RawValues,
  env: Readonly<Record<string, string | undefined>>,
  problems: string[],
): Map<string, unknown> {
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
    const lookup = (written: string): unknown => {
      const select = /^oc\.select:([^,]+)(?:,(.*))?$/.exec(written);
      if (select) {
        const target = absolutePath(select[1].trim(), path);
        if (KEYS.has(target)) return resolve(target);
        return select[2] === undefined ? null : parseYaml(select[2].trim());
      }
      const ref = absolutePath(written, path);
      const fromEnv = envValue(ref, env);
      if (fromEnv !== null) {
        if ('value' in fromEnv) return fromEnv.value;
        problems.push(
          `${path} (${origin}): \${${ref}}: environment variable ${fromEnv.missing} is not set (give a default: ` +
            `\${oc.env:${fromEnv.missing},value})`,
        );
        return failed;
      }
      if (!KEYS.has(ref)) {
        const suggestions = suggestKeys(ref, KEYS.keys());
        problems.push(
          `${path} (${origin}): interpolation \${${ref}} names an unknown ` +
            `key${suggestions.length > 0 ? ` — did you mean ${suggestions.join(' or ')}?` : ''}`,
        );
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
  numberOrString: 'a number or a string',
  map: 'a mapping of named entries',
};

/**
 * Numbers may arrive as strings: quoted YAML values (OmegaConf accepts them for numeric nodes), and Hydra's
 * spellings that YAML 1.2 reads as strings: digit separators (1_024) and inf / -inf / nan.
 */
function asNumber(value: unknown): number | null {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return null;
  const text = value.trim().toLowerCase();
  if (/^[+-]?\.?inf$/.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  if (/^\.?nan$/.test(text)) return NaN;
  const plain = /^[+-]?\d+(_\d+)*(\.\d*)?(e[+-]?\d+)?$/.test(text) ? text.replace(/_/g, '') : text;
  return plain !== '' && Number.isFinite(Number(plain)) ? Number(plain) : null;
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
      return n !== null && !Number.isNaN(n) ? { value: n } : { expected: EXPECTED.float };
    }
    case 'bool':
      return typeof value === 'boolean' ? { value } : { expected: EXPECTED.bool };
    case 'string':
      if (typeof value === 'number') return { value: String(value) };
      return typeof value === 'string' ? { value } : { expected: EXPECTED.string };
    case 'files':
      if (typeof value === 'string') return { value };
      return Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string')
        ? { value }
        : { expected: EXPECTED.files };
    case 'strings':
      // Hydra and verl accept one string for a list of one (trainer.logger=console).
      if (typeof value === 'string') return { value: [value] };
      return Array.isArray(value) && value.every((v) => typeof v === 'string')
        ? { value }
        : { expected: EXPECTED.strings };
    case 'numberOrString':
      // As given: "0.5_2.0" must not pass through asNumber, which reads digit separators.
      return typeof value === 'number' || typeof value === 'string' ? { value } : { expected: EXPECTED.numberOrString };
    case 'floats': {
      const numbers = Array.isArray(value) ? value.map(asNumber) : null;
      return numbers?.every((n) => n !== null && Number.isFinite(n))
        ? { value: numbers }
        : { expected: EXPECTED.floats };
    }
    case 'map':
      return isMapping(value) && Object.values(value).every(isMapping) ? { value } : { expected: EXPECTED.map };
  }
}

/** OmegaConf's mandatory-but-missing value: verl's generated ppo_trainer.yaml writes rollout.name: ??? for its
 *  launcher to fill in. Here it leaves the key at its default, when that default is a value of its own. */
const OMEGACONF_MISSING = '???';

function checkValue(path: string, key: Key<unknown>, value: unknown, origin: string, problems: string[]): unknown {
  if (value === OMEGACONF_MISSING && !(typeof key.defaultValue === 'string' && key.defaultValue.includes('${')))
    return key.defaultValue;
  const result = coerce(key, value);
  if ('expected' in result) {
    problems.push(
      `${path} (${origin}): expected ${result.expected}${key.nullable ? ' or null' : ''}, got ${show(value)}`,
    );
    return undefined;
  }
  const v = result.value;
  if (key.kind === 'map')
    return checkEntries(path, key, v as Record<string, Record<string, unknown>>, origin, problems);
  if (key.range && typeof v === 'number' && !key.range.test(v))
    problems.push(`${path} (${origin}) must be ${key.range.what}, got ${v}`);
  if (key.choices) {
    for (const choice of Array.isArray(v) ? v : [v]) {
      if (typeof choice === 'string' && !key.choices.includes(choice)) {
        const close = closeMatches(choice, key.choices);
        problems.push(
          `${path} (${origin}): unknown value ` +
            `${show(choice)}${close.length > 0 ? ` — did you mean ${close.join(' or ')}?` : ''} (expected one of ` +
            `${key.choices.join(', ')})`,
        );
      }
    }
  }
  return v;
}

/** Each entry of a map key with every member checked by its own key and missing members at their defaults. */
function checkEntries(
  path: string,
  key: Key<unknown>,
  entries: Record<string, Record<string, unknown>>,
  origin: string,
  problems: string[],
): Record<string, Record<string, unknown>> {
  const checked: Record<string, Record<string, unknown>> = {};
  for (const [name, entry] of Object.entries(entries)) {
    checked[name] = {};
    for (const [member, memberKey] of Object.entries(key.entry!)) {
      const value = member in entry ? entry[member] : memberKey.defaultValue;
      checked[name][member] = checkValue(`${path}.${name}.${member}`, memberKey, value, origin, problems);
    }
  }
  return checked;
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

/** A YAML document layered over the defaults. */
export interface ConfigLayer {
  text: string;
  /** Where the text came from, for messages (a file name, "the default job"). */
  source: string;
}

export interface LoadConfigOptions {
  /** YAML layers, applied over the defaults in order (later wins). */
  layers?: readonly ConfigLayer[];
  /** `key.sub=value` strings, applied after the layers in order. */
  overrides?: readonly string[];
  /** Environment for `${oc.env:VAR}` (Node: process.env). */
  env?: Readonly<Record<string, string | undefined>>;
}

export interface ComposedConfig {
  config: PpoConfig;
  /** Lines for the user: keys accepted without effect and why, deprecated spellings, skipped Hydra blocks. */
  notes: string[];
}

function parseLayer(layer: ConfigLayer): Record<string, unknown> {
  let document: unknown;
  try {
    document = parseYaml(layer.text);
  } catch (err) {
    throw new ConfigError([`${layer.source}: not valid YAML: ${(err as Error).message}`]);
  }
  if (document === null || document === undefined) return {};
  if (!isMapping(document))
    throw new ConfigError([
      `${layer.source}: expected a mapping of config keys at the top level, got ${show(document)}`,
    ]);
  return document;
}

function notesOf(layers: Layers, skippedBlocks: Set<string>, config: PpoConfig): string[] {
  const notes: string[] = [];
  const rollout = config.actor_rollout_ref.rollout;
  if (rollout.name !== 'hf' && rollout.server_urls.length === 0) {
    notes.push(
      `actor_rollout_ref.rollout.name=${rollout.name} without rollout.server_urls: responses are generated ` +
        `in-process, on this engine's decoder (docs/rollout-servers.md)`,
    );
  }
  const { algorithm } = config;
  if (algorithm.use_pf_ppo && !usesPfPpo(config)) {
    notes.push(
      `algorithm.use_pf_ppo=true does nothing with algorithm.adv_estimator=${algorithm.adv_estimator}: verl ` +
        `resamples the batch for PF-PPO only after GAE's advantages, so this run trains on the batch as generated`,
    );
  }
  if (layers.raw.get('actor_rollout_ref.rollout.multi_turn.format')?.value === 'qwen') {
    notes.push(
      'actor_rollout_ref.rollout.multi_turn.format=qwen read as hermes: Qwen2.5/3 chat templates write ' +
        '<tool_call>{json}</tool_call>, the hermes format',
    );
  }
  for (const block of skippedBlocks) notes.push(`skipped the ${block}: block (${HYDRA_BLOCKS[block]})`);
  if (layers.aliases.size > 0) {
    notes.push(
      `read ${layers.aliases.size} deprecated, renamed (verl 1dda039b), recipe or Search-R1 spelling(s) as schema keys: ` +
        [...layers.aliases].map(([target, alias]) => `${alias.from} → ${target}=${show(alias.value)}`).join(', '),
    );
  }
  if (layers.ignored.size > 0) {
    const byReason = new Map<string, string[]>();
    for (const [path, reason] of layers.ignored) byReason.set(reason, [...(byReason.get(reason) ?? []), path]);
    notes.push(
      `ignored ${layers.ignored.size} key(s) with no meaning on one WebGPU adapter: ` +
        [...byReason].map(([reason, paths]) => `${paths.join(', ')} (${reason})`).join('; '),
    );
  }
  return notes;
}

/**
 * Defaults ← YAML layers ← overrides ← aliases, interpolated and validated; throws ConfigError listing every problem.
 */
export function composeConfig({ layers = [], overrides = [], env = {} }: LoadConfigOptions = {}): ComposedConfig {
  const state: Layers = {
    raw: new Map([...KEYS].map(([path, key]) => [path, { value: key.defaultValue, origin: 'default' }])),
    aliases: new Map(),
    aliasSources: new Map(),
    ignored: new Map(),
    problems: [],
  };
  const { raw, problems } = state;
  const skippedBlocks = new Set<string>();
  for (const layer of layers) {
    for (const [name, value] of Object.entries(parseLayer(layer))) {
      if (name in HYDRA_BLOCKS) skippedBlocks.add(name);
      else assign(state, name, value, layer.source);
    }
  }
  for (const override of overrides) {
    const { path, value, remove } = parseOverride(override);
    if (remove) removeKey(state, path, 'command line');
    else assign(state, path, value, 'command line');
  }
  for (const [target, alias] of state.aliases) {
    // A weak alias (verl 1dda039b's reward.* over the legacy reward_model.* / custom_reward_function.*) loses to a
    // target some layer set: verl's migration keeps a legacy value that is not null.
    if (alias.weak && raw.get(target)!.origin !== 'default' && raw.get(target)!.value !== null) {
      state.aliases.delete(target);
      continue;
    }
    // A conditional alias (the nested lora.* keys) applies only while its condition's key is > 0 (lora.rank).
    if (alias.when !== undefined && !((asNumber(state.aliasSources.get(alias.when)) ?? 0) > 0)) {
      state.aliases.delete(target);
      continue;
    }
    raw.set(target, { value: alias.value, origin: `${alias.origin}, as ${alias.from}` });
  }

  const resolved = resolveInterpolations(raw, env, problems);
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
  deriveDefaults(config);
  checkCombinations(config, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return { config, notes: notesOf(state, skippedBlocks, config) };
}

/** composeConfig's configuration alone. */
export function loadConfig(options: LoadConfigOptions = {}): PpoConfig {
  return composeConfig(options).config;
}

/** The resolved configuration as YAML (`--cfg job`, and RUN_DIR/config.yaml, as Hydra's .hydra/config.yaml). */
export function configToYaml(config: PpoConfig): string {
  return stringifyYaml(config, { nullStr: 'null' });
}

function showDefault(value: unknown): string {
  if (typeof value === 'string') return value === '' ? '""' : value;
  if (Array.isArray(value)) return `[${value.map(showDefault).join(', ')}]`;
  if (isMapping(value))
    return `{${Object.entries(value)
      .map(([k, v]) => `${k}: ${showDefault(v)}`)
      .join(', ')}}`;
  return String(value);
}

/** Flattens a YAML layer into dotted key paths (for --help's layer column). */
function flatten(value: unknown, prefix: string, out: Map<string, unknown>): Map<string, unknown> {
  if (isMapping(value) && !KEYS.has(prefix)) {
    for (const [name, member] of Object.entries(value)) flatten(member, prefix ? `${prefix}.${name}` : name, out);
  } else {
    out.set(prefix, value);
  }
  return out;
}

/** The groups --help can show alone: each dotted prefix of a key, e.g. algorithm, actor_rollout_ref.actor. */
function helpSections(): Set<string> {
  const sections = new Set<string>();
  for (const path of KEYS.keys()) {
    const parts = path.split('.');
    for (let n = 1; n < parts.length; n++) sections.add(parts.slice(0, n).join('.'));
  }
  return sections;
}

/**
 * Every key with its default and meaning, grouped as in the YAML file (for `node train.js --help`); a key the
 * built-in job's layer sets to another value shows that value too, as it runs when no model and no data are given.
 * With `section` (`--help algorithm`), only the keys under that group; an unknown one is a ConfigError naming the
 * top-level groups.
 */
export function formatHelp(builtinJob?: ConfigLayer, section?: string): string {
  if (section !== undefined && !helpSections().has(section)) {
    const top = [...helpSections()].filter((s) => !s.includes('.'));
    throw new ConfigError([
      `--help ${section}: no such group of keys; expected one of ${top.join(', ')} or a group inside one (e.g. ` +
        'actor_rollout_ref.actor)',
    ]);
  }
  const job = builtinJob ? flatten(parseLayer(builtinJob), '', new Map()) : new Map<string, unknown>();
  const lines = [
    `Keys and defaults follow ${VERL_FOLLOWED.repo} ${VERL_FOLLOWED.commit} (${VERL_FOLLOWED.date}); verl ` +
      'b178a3cd command lines and its generated config still load (docs/training.md).',
    "Configuration keys, by layer (later wins): verl's default (shown after =)" +
      (builtinJob
        ? `, or ${builtinJob.source} when neither actor_rollout_ref.model.path nor data.train_files is set (shown as ` +
          `[built-in job: …] where it differs)`
        : '') +
      ', then a --config YAML file, then key.sub=value on the command line.',
  ];
  let group: string | null = null;
  for (const [path, key] of KEYS) {
    if (section !== undefined && !path.startsWith(`${section}.`)) continue;
    const dot = path.lastIndexOf('.');
    const parent = dot < 0 ? '' : path.slice(0, dot);
    if (parent !== group) {
      lines.push('', parent === '' ? '(top level):' : `${parent}:`);
      group = parent;
    }
    const choices = key.choices && key.kind === 'string' ? ` (${key.choices.join(' | ')})` : '';
    const shown = showDefault(key.defaultValue);
    const jobValue = job.has(path) ? showDefault(job.get(path)) : shown;
    const layer = jobValue !== shown ? `   [built-in job: ${jobValue}]` : '';
    lines.push(`  ${path.slice(dot + 1)} = ${shown}${layer}`, `      ${key.help}${choices}`);
    for (const [member, memberKey] of Object.entries(key.entry ?? {}))
      lines.push(`    <name>.${member} = ${showDefault(memberKey.defaultValue)}`, `        ${memberKey.help}`);
  }
  return lines.join('\n');
}
