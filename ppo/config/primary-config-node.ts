// Hydra's primary config (`--config-path=DIR --config-name=NAME`, `-cp`/`-cn`) as verl's main_ppo reads it: the
// file NAME.yaml in DIR, composed through its `defaults:` list. verl's own ppo_trainer is the schema's defaults,
// and its ppo_megatron_trainer the same with Megatron sharding (ignored on one adapter), so `- ppo_trainer` (and
// `--config-name=ppo_megatron_trainer` with no file of that name in DIR, or no DIR: verl's
// `@hydra.main(config_path="config")` resolves a relative DIR such as ./config against verl/trainer/) adds
// nothing; `_self_` places the file's own keys (Hydra 1.1+: at the end when the list leaves it out); another plain
// entry is NAME.yaml beside it, composed the same way. `group@package: option` entries name verl's component files,
// whose keys the schema already holds: the loader skips the block with a note, as it does for ppo_trainer.yaml given
// by --config.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError, type ConfigLayer } from '../config.ts';

/** verl's own config that the schema's defaults stand for. */
export const VERL_PRIMARY_CONFIG = 'ppo_trainer';

/**
 * verl's own primary configs (verl/trainer/config at 1dda039b), built in: what each is here. The generated Megatron
 * config differs from ppo_trainer's only outside the schema (optim.optimizer adam, use_remove_padding, seeds,
 * sharding), at 1dda039b and at b178a3cd alike.
 */
const VERL_BUILTIN_CONFIGS: Record<string, string> = {
  [VERL_PRIMARY_CONFIG]: "verl's own config, whose keys and defaults the schema holds",
  ppo_megatron_trainer:
    "verl's own config: verl's defaults with Megatron sharding (defaults: ppo_trainer, override model_engine: " +
    'megatron), which means nothing on one adapter',
};

export interface PrimaryConfig {
  layers: ConfigLayer[];
  notes: string[];
}

const withoutExtension = (name: string) => name.replace(/\.ya?ml$/, '');

async function readIfPresent(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ConfigError([`${file}: cannot read it (${(err as Error).message})`]);
  }
}

/** The layers of NAME in DIR, its defaults first; `from` names what asked for it (for messages). */
async function compose(
  dir: string,
  name: string,
  from: string,
  seen: string[],
  notes: string[],
): Promise<ConfigLayer[]> {
  const file = join(dir, `${name}.yaml`);
  const text = await readIfPresent(file);
  if (text === null) {
    if (name in VERL_BUILTIN_CONFIGS) {
      notes.push(`${from}: ${name} is ${VERL_BUILTIN_CONFIGS[name]} (no ${file} here)`);
      return [];
    }
    throw new ConfigError([
      `${from}: ${file} does not exist (--config-path names the folder, --config-name the file without .yaml)`,
    ]);
  }
  if (seen.includes(file))
    throw new ConfigError([`${file}: its defaults list includes itself (${[...seen, file].join(' → ')})`]);
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (err) {
    throw new ConfigError([`${file}: not valid YAML: ${(err as Error).message.split('\n')[0]}`]);
  }
  const own: ConfigLayer = { text, source: file };
  const defaults =
    document !== null && typeof document === 'object' && !Array.isArray(document)
      ? (document as Record<string, unknown>).defaults
      : undefined;
  if (defaults === undefined || defaults === null) return [own];
  if (!Array.isArray(defaults))
    throw new ConfigError([
      `${file}: defaults must be a list (Hydra's defaults list), got ${JSON.stringify(defaults)}`,
    ]);
  const before: ConfigLayer[] = [];
  const after: ConfigLayer[] = [];
  let selfSeen = false;
  for (const entry of defaults) {
    const target = selfSeen ? after : before;
    if (entry === '_self_') selfSeen = true;
    else if (typeof entry === 'string') {
      const entryName = withoutExtension(entry.trim());
      if (entryName in VERL_BUILTIN_CONFIGS && (await readIfPresent(join(dir, `${entryName}.yaml`))) === null) continue;
      target.push(...(await compose(dir, entryName, `${file} defaults entry ${entry}`, [...seen, file], notes)));
    }
    // `group@package: option` and `optional …` entries: verl's component files (the loader notes the skipped block).
  }
  return [...before, own, ...after];
}

/** The layers that `--config-path=dir --config-name=name` composes (dir null: verl's own config folder). */
export async function readPrimaryConfig(dir: string | null, name: string): Promise<PrimaryConfig> {
  const notes: string[] = [];
  const configName = withoutExtension(name);
  const option = `--config-name=${name}`;
  if (dir === null) {
    if (!(configName in VERL_BUILTIN_CONFIGS)) {
      throw new ConfigError([
        `${option} without --config-path names a config of verl's own folder; only ` +
          `${Object.keys(VERL_BUILTIN_CONFIGS).join(' and ')} are built in — give --config-path=DIR for your own ` +
          `${configName}.yaml`,
      ]);
    }
    if (configName !== VERL_PRIMARY_CONFIG)
      notes.push(`${option}: ${configName} is ${VERL_BUILTIN_CONFIGS[configName]}`);
    return { layers: [], notes };
  }
  const layers = await compose(dir, configName, `${option} --config-path=${dir}`, [], notes);
  return { layers, notes };
}
