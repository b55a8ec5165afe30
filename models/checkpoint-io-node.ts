// Hugging Face model directories in and out (Node). Loading: config.json → DecoderConfig, the tensors
// (single or sharded safetensors) checked against what the config implies, generation_config.json.
// Saving: a complete directory transformers loads as is, written into a temporary sibling, fsynced, then
// swapped in by rename, so an interrupted save never leaves a half-written checkpoint at the target.

import { copyFile, mkdir, open, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { type DecoderConfig, parseHfConfig, toHfConfig, withHead } from './hf-config.ts';
import { checkpointTensorShapes } from './parameter-layout.ts';
import { CheckpointTensors, writeCheckpointTensors, type TensorSource } from './safetensors-node.ts';
import { exists } from './fs-node.ts';

export const CONFIG_FILE = 'config.json';
export const GENERATION_CONFIG_FILE = 'generation_config.json';
/** Tokenizer files transformers may save beside a model; whichever exist are copied with a checkpoint. */
export const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'chat_template.jinja',
  'chat_template.json',
  'added_tokens.json',
  'tokenizer.model',
  'vocab.json',
  'merges.txt',
] as const;

export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

export interface GenerationConfig {
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
  /** The whole file, kept so a save writes back what it read (sampling defaults and all). */
  raw: Record<string, unknown>;
}

export interface HfCheckpoint {
  dir: string;
  config: DecoderConfig;
  generationConfig: GenerationConfig | null;
  tensors: CheckpointTensors;
}

async function readJson(path: string): Promise<unknown> {
  const text = await readFile(path, 'utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(`${path}: not valid JSON (${(err as Error).message})`);
  }
}

export function parseGenerationConfig(json: unknown, file = GENERATION_CONFIG_FILE): GenerationConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new CheckpointError(`${file}: expected a JSON object`);
  const raw = json as Record<string, unknown>;
  const id = (key: string): number | null => {
    const v = raw[key];
    if (v === undefined || v === null) return null;
    if (!Number.isSafeInteger(v) || (v as number) < 0)
      throw new CheckpointError(`${file}: '${key}' is ${JSON.stringify(v)}, expected a token id`);
    return v as number;
  };
  const eos = raw.eos_token_id;
  const eosList = eos === undefined || eos === null ? [] : Array.isArray(eos) ? eos : [eos];
  if (!eosList.every((v) => Number.isSafeInteger(v) && v >= 0))
    throw new CheckpointError(
      `${file}: 'eos_token_id' is ${JSON.stringify(eos)}, expected a token id or a list of them`,
    );
  return { bosTokenId: id('bos_token_id'), eosTokenIds: eosList as number[], padTokenId: id('pad_token_id'), raw };
}

/** A model directory's generation_config.json, or null when it has none (the file is optional, as in transformers). */
export async function readGenerationConfig(dir: string): Promise<GenerationConfig | null> {
  const path = join(dir, GENERATION_CONFIG_FILE);
  return (await exists(path)) ? parseGenerationConfig(await readJson(path), path) : null;
}

const LAYER_TENSOR = /^model\.layers\.(\d+)\./;

/**
 * Checks that every tensor the config implies is present with its shape. Returns the names the config
 * does not use (e.g. an lm_head saved although tied, or a causal LM's lm_head when loading a critic),
 * which callers may ignore as transformers does — except layers past num_hidden_layers: loading would
 * silently drop them, and the next save would write the truncated model.
 */
export function checkTensorShapes(config: DecoderConfig, tensors: CheckpointTensors, dir: string): string[] {
  const expected = checkpointTensorShapes(config);
  for (const [name, shape] of expected) {
    const info = tensors.info(name);
    if (!info)
      throw new CheckpointError(
        `${dir}: ${config.architecture} needs tensor '${name}' [${shape.join(', ')}], which the checkpoint does not ` +
          `have`,
      );
    if (info.shape.join() !== shape.join()) {
      throw new CheckpointError(
        `${dir}: tensor '${name}' has shape [${info.shape.join(', ')}], config.json implies [${shape.join(', ')}]`,
      );
    }
  }
  const unused = tensors.names().filter((n) => !expected.has(n));
  const layers = 1 + Math.max(-1, ...unused.map((n) => Number(LAYER_TENSOR.exec(n)?.[1] ?? -1)));
  if (layers > config.numLayers) {
    throw new CheckpointError(
      `${dir}: the weights hold ${layers} layers but config.json num_hidden_layers is ${config.numLayers}; ` +
        "loading would drop the extra layers — set num_hidden_layers to the checkpoint's count",
    );
  }
  return unused;
}

/**
 * Opens a HF model directory. With `as`, reads the weights for another head of the same family: a critic
 * ('token-classification') from a causal-LM checkpoint keeps its backbone, and its new score head is absent
 * from the tensors (the model initialises it). Close `tensors` when done.
 */
export async function openHfCheckpoint(
  dir: string,
  options: { as?: DecoderConfig['head'] } = {},
): Promise<HfCheckpoint> {
  const config = parseHfConfig(await readJson(join(dir, CONFIG_FILE)), join(dir, CONFIG_FILE));
  const generationConfig = await readGenerationConfig(dir);
  const tensors = await CheckpointTensors.open(dir);
  try {
    checkTensorShapes(config, tensors, dir);
  } catch (err) {
    await tensors.close();
    throw err;
  }
  if (options.as && options.as !== config.head) {
    return { dir, config: withHead(config, options.as), generationConfig, tensors };
  }
  return { dir, config, generationConfig, tensors };
}

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function writeFileSynced(path: string, text: string): Promise<void> {
  const handle = await open(path, 'w');
  try {
    await handle.writeFile(text, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export interface SaveHfCheckpointOptions {
  config: DecoderConfig;
  /** Every tensor checkpointTensorShapes(config) lists, and no other. */
  tensors: readonly TensorSource[];
  /** Written for causal LMs; defaults to the token ids of config. */
  generationConfig?: Record<string, unknown>;
  /** A directory whose tokenizer files (TOKENIZER_FILES) are copied along. */
  tokenizerFrom?: string;
  maxShardBytes?: number;
}

function checkTensorsToSave(config: DecoderConfig, tensors: readonly TensorSource[], target: string): void {
  const expected = checkpointTensorShapes(config);
  const given = new Set<string>();
  for (const t of tensors) {
    const shape = expected.get(t.name);
    if (!shape) throw new CheckpointError(`saving ${target}: tensor '${t.name}' is not part of ${config.architecture}`);
    if (t.shape.join() !== shape.join())
      throw new CheckpointError(
        `saving ${target}: tensor '${t.name}' has shape [${t.shape.join(', ')}], ${config.architecture} needs ` +
          `[${shape.join(', ')}]`,
      );
    given.add(t.name);
  }
  const missing = [...expected.keys()].filter((n) => !given.has(n));
  if (missing.length > 0)
    throw new CheckpointError(
      `saving ${target}: ${config.architecture} needs tensors that were not given: ${missing.join(', ')}`,
    );
}

/** Moves the finished temporary directory to target, replacing a previous checkpoint there. */
async function swapInto(tmp: string, target: string): Promise<void> {
  let previous: string | null = null;
  if (await exists(target)) {
    if (!(await stat(target)).isDirectory())
      throw new CheckpointError(`saving ${target}: exists and is not a directory`);
    const entries = await readdir(target);
    // Replace only what is recognisably a checkpoint: never move away a directory of unrelated files.
    if (entries.length > 0 && !entries.includes(CONFIG_FILE))
      throw new CheckpointError(
        `saving ${target}: exists, is not empty and holds no ${CONFIG_FILE}; refusing to replace it`,
      );
    previous = `${tmp}.previous`;
    await rename(target, previous);
  }
  // Between these two renames the target is briefly absent; the previous checkpoint stays complete at
  // `previous` until the new one is in place.
  await rename(tmp, target);
  await fsyncPath(dirname(target));
  if (previous) await rm(previous, { recursive: true, force: true });
}

/**
 * Saves a complete HF directory: config.json (architecture from config: *ForCausalLM for an actor,
 * *ForTokenClassification for a critic), model.safetensors (or shards + index), generation_config.json for
 * causal LMs, and the tokenizer files of `tokenizerFrom`.
 */
export async function saveHfCheckpoint(target: string, options: SaveHfCheckpointOptions): Promise<void> {
  const { config } = options;
  const hfConfig = toHfConfig(config);
  checkTensorsToSave(config, options.tensors, target);
  await mkdir(dirname(target), { recursive: true });
  const tmp = join(dirname(target), `.${basename(target)}.saving-${process.pid}-${Date.now()}`);
  await mkdir(tmp);
  try {
    await writeFileSynced(join(tmp, CONFIG_FILE), `${JSON.stringify(hfConfig, null, 2)}\n`);
    await writeCheckpointTensors(tmp, options.tensors, { maxShardBytes: options.maxShardBytes });
    if (config.head === 'causal-lm') {
      const generation = options.generationConfig ?? {
        bos_token_id: config.bosTokenId,
        eos_token_id: config.eosTokenIds.length === 1 ? config.eosTokenIds[0] : config.eosTokenIds,
        pad_token_id: config.padTokenId,
      };
      await writeFileSynced(join(tmp, GENERATION_CONFIG_FILE), `${JSON.stringify(generation, null, 2)}\n`);
    }
    if (options.tokenizerFrom) {
      for (const file of TOKENIZER_FILES) {
        const from = join(options.tokenizerFrom, file);
        if (!(await exists(from))) continue;
        await copyFile(from, join(tmp, file));
        await fsyncPath(join(tmp, file));
      }
    }
    await fsyncPath(tmp);
    await swapInto(tmp, target);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}
