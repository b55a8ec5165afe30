// verl's RL dataset (RLHFDataset) and its sampler. A row holds `prompt` (chat messages), `data_source` (which
// reward), `reward_model.ground_truth` and `extra_info`; rows come from Parquet (hyparquet) or JSONL. Each
// prompt is rendered with the tokenizer's chat template (generation prompt included) and tokenized once;
// prompts over data.max_prompt_length are dropped (filter_overlong_prompts) or truncated as data.truncation
// says. Training order: a permutation per epoch that is a pure function of (data.seed, epoch), so a
// DataCursor {epoch, index} is the whole data position a checkpoint needs. Browser-safe: takes bytes and text.
import { parquetReadObjects, toJson } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { Rng } from '../../engine/rng.ts';
import { applyChatTemplate, type ChatMessage, type ChatTemplate } from '../../models/chat-template.ts';
import type { Tokenizer } from '../../models/tokenizer.ts';

/** One raw row and where it came from ("train.parquet row 12"), for error messages. */
export interface RlRecord {
  row: Record<string, unknown>;
  where: string;
}

export interface RlExample {
  /** Position in the dataset after filtering. */
  index: number;
  where: string;
  messages: ChatMessage[];
  dataSource: string;
  groundTruth: unknown;
  extraInfo: Record<string, unknown>;
  /** The rendered chat template, generation prompt included. */
  promptText: string;
  /** Its tokens, truncated to data.max_prompt_length when data.truncation allows. */
  promptIds: number[];
}

export interface RlDataset {
  examples: RlExample[];
  /** Rows dropped by data.filter_overlong_prompts. */
  filtered: number;
}

/** data.truncation: what an overlong prompt becomes (error: the run stops). */
export type PromptTruncation = 'error' | 'left' | 'right' | 'middle';

/** The data.* keys the dataset reads, as the config spells them (a caller spreads config.data), and its tokenizer. */
export interface RlDatasetOptions {
  prompt_key: string;
  reward_fn_key: string;
  max_prompt_length: number;
  filter_overlong_prompts: boolean;
  truncation: PromptTruncation;
  tokenizer: Pick<Tokenizer, 'encode'>;
  template: ChatTemplate;
  /** Tool schemas the chat template shows the model (multi_turn.tool_config_path's). */
  tools?: unknown[] | null;
}

/** The data.* keys that size and order the training batches (config.data fits). */
export interface PromptSamplerOptions {
  train_batch_size: number;
  gen_batch_size: number | null;
  shuffle: boolean;
  seed: number;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function parseJsonl(text: string, file: string): RlRecord[] {
  const records: RlRecord[] = [];
  // A UTF-8 byte-order mark (Windows editors write one) is not part of the first row.
  text
    .replace(/^\uFEFF/, '')
    .split('\n')
    .forEach((line, i) => {
      if (line.trim() === '') return;
      const where = `${file} line ${i + 1}`;
      let row: unknown;
      try {
        row = JSON.parse(line);
      } catch (err) {
        throw new Error(`${where}: not valid JSON: ${(err as Error).message}`);
      }
      if (!isMapping(row)) throw new Error(`${where}: expected a JSON object per line, got ${JSON.stringify(row)}`);
      records.push({ row, where });
    });
  return records;
}

/** Rows of a Parquet file; nested list/struct columns (verl's `prompt`, `reward_model`) become arrays and objects. */
export async function readParquet(data: ArrayBuffer, file: string): Promise<RlRecord[]> {
  let rows: Record<string, unknown>[];
  try {
    rows = await parquetReadObjects({ file: data, compressors });
  } catch (err) {
    throw new Error(`${file}: cannot read as Parquet: ${(err as Error).message}`);
  }
  // INT64 columns (extra_info.index) arrive as BigInt; plain numbers are what reward functions expect.
  return rows.map((row, i) => ({ row: toJson(row) as Record<string, unknown>, where: `${file} row ${i}` }));
}

function parseMessages(value: unknown, where: string, key: string): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new Error(
      `${where}: ${key} must be a non-empty list of chat messages {role, content}, got ${JSON.stringify(value)}`,
    );
  return value.map((message, i) => {
    if (!isMapping(message) || typeof message.role !== 'string' || typeof message.content !== 'string') {
      throw new Error(`${where}: ${key}[${i}] must be {role: string, content: string}, got ${JSON.stringify(message)}`);
    }
    return message as ChatMessage;
  });
}

function parseRecord({ row, where }: RlRecord, options: Pick<RlDatasetOptions, 'prompt_key' | 'reward_fn_key'>) {
  const missing = [options.prompt_key, options.reward_fn_key, 'reward_model'].filter((column) => !(column in row));
  if (missing.length > 0)
    throw new Error(`${where}: missing column(s) ${missing.join(', ')} (have ${Object.keys(row).join(', ')})`);
  const dataSource = row[options.reward_fn_key];
  if (typeof dataSource !== 'string')
    throw new Error(`${where}: ${options.reward_fn_key} must be a string, got ${JSON.stringify(dataSource)}`);
  const rewardModel = row.reward_model;
  if (!isMapping(rewardModel) || !('ground_truth' in rewardModel))
    throw new Error(`${where}: reward_model must be {ground_truth, ...}, got ${JSON.stringify(rewardModel)}`);
  const extraInfo = row.extra_info ?? {};
  if (!isMapping(extraInfo))
    throw new Error(`${where}: extra_info must be an object, got ${JSON.stringify(extraInfo)}`);
  return {
    messages: parseMessages(row[options.prompt_key], where, options.prompt_key),
    dataSource,
    groundTruth: rewardModel.ground_truth,
    extraInfo,
  };
}

/** verl's truncation of raw_prompt_ids: keep the last (left), the first (right) or both ends (middle). */
export function truncatePrompt(
  ids: number[],
  maxLength: number,
  truncation: PromptTruncation,
  where: string,
): number[] {
  if (ids.length <= maxLength) return ids;
  switch (truncation) {
    case 'left':
      return ids.slice(ids.length - maxLength);
    case 'right':
      return ids.slice(0, maxLength);
    case 'middle': {
      const head = Math.floor(maxLength / 2);
      return [...ids.slice(0, head), ...ids.slice(ids.length - (maxLength - head))];
    }
    case 'error':
      throw new Error(
        `${where}: prompt is ${ids.length} tokens, longer than data.max_prompt_length=${maxLength} — ` +
          'raise data.max_prompt_length, set data.filter_overlong_prompts=true, or data.truncation=left|right|middle',
      );
  }
}

/** Validates the rows, applies the chat template, tokenizes, and filters or truncates overlong prompts. */
export async function buildRlDataset(records: readonly RlRecord[], options: RlDatasetOptions): Promise<RlDataset> {
  const examples: RlExample[] = [];
  let filtered = 0;
  for (const record of records) {
    const parsed = parseRecord(record, options);
    const { text: promptText, ids } = await applyChatTemplate(options.tokenizer, options.template, parsed.messages, {
      addGenerationPrompt: true,
      tools: options.tools ?? null,
    });
    if (options.filter_overlong_prompts && ids.length > options.max_prompt_length) {
      filtered++;
      continue;
    }
    const promptIds = truncatePrompt(ids, options.max_prompt_length, options.truncation, record.where);
    examples.push({ index: examples.length, where: record.where, ...parsed, promptText, promptIds });
  }
  if (examples.length === 0) {
    throw new Error(
      `no prompts left${filtered > 0 ? ` after dropping ${filtered} longer than data.max_prompt_length=${options.max_prompt_length}` : ''}`,
    );
  }
  return { examples, filtered };
}

/** Position in the training data: `index` prompts of epoch `epoch`'s order have been used. */
export interface DataCursor {
  epoch: number;
  index: number;
}

/**
 * One generator seed per (seed, epoch), through murmur3's finaliser: Rng seeds by stepping splitmix32 from its
 * seed, so seeds a fixed step apart (seed + k·epoch) would give overlapping streams.
 */
function epochSeed(seed: number, epoch: number): number {
  let h = (seed ^ Math.imul(epoch + 1, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** The order of epoch `epoch` (Fisher–Yates), a pure function of (size, seed, epoch). */
export function epochPermutation(size: number, seed: number, epoch: number): Uint32Array {
  const order = new Uint32Array(size);
  for (let i = 0; i < size; i++) order[i] = i;
  const rng = new Rng(epochSeed(seed, epoch));
  for (let i = size - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

export interface PromptBatch {
  /** Dataset indices of the batch's prompts. */
  indices: number[];
  /** The epoch the batch belongs to. */
  epoch: number;
  /** Where the next batch starts (store this in a checkpoint). */
  next: DataCursor;
}

/**
 * Generation batches of data.gen_batch_size prompts (data.train_batch_size when null), as verl's dataloader with
 * drop_last: an epoch is floor(size / batch) batches, the remainder is skipped, and batches never straddle epochs.
 */
export class PromptSampler {
  readonly batchesPerEpoch: number;
  private cached: { epoch: number; order: Uint32Array } | null = null;

  /** `batchKey` names the config key of the batch size in errors (data.gen_batch_size under dynamic sampling). */
  constructor(
    readonly size: number,
    readonly options: { batchSize: number; shuffle: boolean; seed: number; batchKey?: string },
  ) {
    this.batchesPerEpoch = Math.floor(size / options.batchSize);
    const key = options.batchKey ?? 'data.train_batch_size';
    if (this.batchesPerEpoch === 0) {
      throw new Error(
        `${key}=${options.batchSize} is larger than the ${size} training prompts — lower ${key} to at most ${size}`,
      );
    }
  }

  static fromConfig(size: number, data: PromptSamplerOptions): PromptSampler {
    const batchKey = data.gen_batch_size === null ? 'data.train_batch_size' : 'data.gen_batch_size';
    return new PromptSampler(size, {
      batchSize: data.gen_batch_size ?? data.train_batch_size,
      shuffle: data.shuffle,
      seed: data.seed,
      batchKey,
    });
  }

  private order(epoch: number): Uint32Array | null {
    if (!this.options.shuffle) return null;
    if (this.cached?.epoch !== epoch)
      this.cached = { epoch, order: epochPermutation(this.size, this.options.seed, epoch) };
    return this.cached.order;
  }

  batchAt(cursor: DataCursor): PromptBatch {
    const { batchSize } = this.options;
    if (
      !Number.isInteger(cursor.epoch) ||
      cursor.epoch < 0 ||
      !Number.isInteger(cursor.index) ||
      cursor.index < 0 ||
      cursor.index % batchSize !== 0
    ) {
      throw new Error(
        `data cursor {epoch: ${cursor.epoch}, index: ${cursor.index}} is not a batch boundary of ` +
          `${this.options.batchKey ?? 'data.train_batch_size'}=${batchSize}`,
      );
    }
    const start = cursor.index + batchSize > this.size ? { epoch: cursor.epoch + 1, index: 0 } : cursor;
    const order = this.order(start.epoch);
    const indices = Array.from({ length: batchSize }, (_, i) => (order ? order[start.index + i] : start.index + i));
    return { indices, epoch: start.epoch, next: { epoch: start.epoch, index: start.index + batchSize } };
  }
}

/** verl: trainer.total_training_steps when set, else every batch of every epoch. */
export function totalTrainingSteps(
  sampler: PromptSampler,
  trainer: { total_training_steps: number | null; total_epochs: number },
): number {
  return trainer.total_training_steps ?? sampler.batchesPerEpoch * trainer.total_epochs;
}
