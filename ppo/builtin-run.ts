// Assembles the built-in run (actor_rollout_ref.model.path null, data.train_files null) without touching files:
// the arithmetic task's character tokenizer and chat template, its training and held-out prompts, the
// from-scratch actor with its supervised warm start, the critic initialised from that actor, and the rule
// reward. Browser-safe: the demo calls it in a tab; Node's run setup does the same for the built-in branch.
import type { Engine } from '../engine/index.ts';
import type { PpoConfig } from './config.ts';
import { usesCritic } from './config.ts';
import { criticFromCausalLm } from '../models/critic-init.ts';
import { JsTokenizer, type Tokenizer } from '../models/tokenizer.ts';
import { ChatTemplate } from '../models/chat-template.ts';
import { buildRlDataset, type DataCursor, type PromptSampler, type RlExample } from './dataset.ts';
import { arithmeticDataset, arithmeticTokenizerFiles } from './tasks/arithmetic.ts';
import { DEFAULT_SFT_WARM_START, warmStartBuiltinActor, type SftWarmStartConfig } from './default-job.ts';
import type { SftStepResult } from './sft-trainer.ts';
import { computeScore, toRewardScore, type RewardFunction } from './rewards/index.ts';
import type { ModelWeights, PromptRecord, TrainerIo } from './trainer.ts';

export interface BuiltinRun {
  tokenizer: Tokenizer;
  /** tokenizer.json and tokenizer_config.json, written beside every saved model so it is a complete HF directory. */
  tokenizerFiles: Record<string, string>;
  train: RlExample[];
  val: RlExample[];
  actor: ModelWeights;
  critic: ModelWeights | null;
  reward: RewardFunction;
  warmStart: SftStepResult[];
}

export interface BuiltinTaskSize {
  trainSize: number;
  valSize: number;
}

export const BUILTIN_TASK_SIZE: BuiltinTaskSize = { trainSize: 4000, valSize: 256 };
const BUILTIN_DIGITS = 2;

/** The built-in task's tokenizer, chat template and the files that describe them. */
export function builtinTokenizer(): { tokenizer: Tokenizer; template: ChatTemplate; files: Record<string, string> } {
  const { tokenizerJson, tokenizerConfig } = arithmeticTokenizerFiles();
  const tokenizer = JsTokenizer.fromJson(tokenizerJson, tokenizerConfig);
  return {
    tokenizer,
    template: new ChatTemplate(tokenizerConfig, tokenizer.special),
    files: { 'tokenizer.json': JSON.stringify(tokenizerJson), 'tokenizer_config.json': JSON.stringify(tokenizerConfig, null, 2) },
  };
}

/** The built-in task's train/validation prompts, tokenized with the chat template (seeded by data.seed). */
export async function builtinDataset(config: PpoConfig, tokenizer: Tokenizer, template: ChatTemplate, size: BuiltinTaskSize = BUILTIN_TASK_SIZE): Promise<{ train: RlExample[]; val: RlExample[] }> {
  const options = { ...config.data, tokenizer, template };
  const records = arithmeticDataset({ digits: BUILTIN_DIGITS, ...size, seed: config.data.seed });
  return {
    train: (await buildRlDataset(records.train, options)).examples,
    val: (await buildRlDataset(records.val, options)).examples,
  };
}

export interface BuiltinRunOptions {
  /** Task size; the demo uses a smaller validation set than `node train.js`. */
  task?: BuiltinTaskSize;
  /** Warm-start settings over DEFAULT_SFT_WARM_START (the seed is always trainer.seed). */
  warmStart?: Partial<Omit<SftWarmStartConfig, 'seed'>>;
  onWarmStartStep?: (result: SftStepResult) => void;
}

export async function setUpBuiltinRun(engine: Engine, config: PpoConfig, options: BuiltinRunOptions = {}): Promise<BuiltinRun> {
  if (config.actor_rollout_ref.model.path !== null || config.data.train_files !== null || config.data.val_files !== null) {
    throw new Error('setUpBuiltinRun: the built-in run needs actor_rollout_ref.model.path, data.train_files and data.val_files all null');
  }
  const { tokenizer, template, files } = builtinTokenizer();
  const { train, val } = await builtinDataset(config, tokenizer, template, options.task);
  const warmStartConfig = { ...DEFAULT_SFT_WARM_START, ...options.warmStart, seed: config.trainer.seed };
  const warm = await warmStartBuiltinActor(engine, warmStartConfig, train, options.onWarmStartStep ?? (() => {}));
  const actor: ModelWeights = { config: warm.config, params: warm.params };
  const critic = usesCritic(config) ? await criticFromCausalLm(engine, actor.config, actor.params, config.trainer.seed) : null;
  const reward: RewardFunction = (dataSource, text, groundTruth, extraInfo) => computeScore(dataSource, text, groundTruth, extraInfo);
  return { tokenizer, tokenizerFiles: files, train, val, actor, critic, reward, warmStart: warm.history };
}

/** The score of one response under a run's reward function (a reward's extra fields are dropped). */
export async function scoreResponse(reward: RewardFunction, prompt: Pick<PromptRecord, 'dataSource' | 'groundTruth' | 'extraInfo'>, text: string): Promise<number> {
  return toRewardScore(await reward(prompt.dataSource, text, prompt.groundTruth, prompt.extraInfo), `reward (data_source ${prompt.dataSource})`).score;
}

export function toPromptRecord(example: RlExample): PromptRecord {
  return { promptIds: example.promptIds, dataSource: example.dataSource, groundTruth: example.groundTruth, extraInfo: example.extraInfo };
}

/** The trainer's view of a run: batches from `sampler` starting at `start`, the validation set, decode and score. */
export function runTrainerIo(run: Pick<BuiltinRun, 'tokenizer' | 'train' | 'val' | 'actor' | 'reward'>, sampler: PromptSampler, start: DataCursor = { epoch: 0, index: 0 }): { io: TrainerIo; cursor: () => DataCursor } {
  let cursor = start;
  const io: TrainerIo = {
    nextTrainBatch: () => {
      const batch = sampler.batchAt(cursor);
      cursor = batch.next;
      return batch.indices.map((i) => toPromptRecord(run.train[i]));
    },
    validationSet: () => run.val.map(toPromptRecord),
    decode: (ids) => run.tokenizer.decode(ids, { skipSpecialTokens: true }),
    score: (prompt, text) => scoreResponse(run.reward, prompt, text),
    eosTokenIds: run.actor.config.eosTokenIds,
    padTokenId: run.actor.config.padTokenId ?? run.tokenizer.special.pad?.id ?? 0,
  };
  return { io, cursor: () => cursor };
}
