// Assembles the built-in run (data.train_files null) without touching files: the built-in task's tokenizer and chat
// template, its training and held-out prompts, the from-scratch actor with its supervised warm start (or the
// warm-started one the caller loaded from actor_rollout_ref.model.path), the critic initialised from that actor,
// the rule reward and, for the search task, the retriever over its corpus. Browser-safe: the demo calls it in a
// tab; Node's run setup does the same for the built-in branch.
import type { Engine } from '../../engine/index.ts';
import type { PpoConfig } from '../config.ts';
import { usesCritic } from '../config.ts';
import { criticFromCausalLm } from '../../models/critic-init.ts';
import { JsTokenizer, type Tokenizer } from '../../models/tokenizer.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { buildRlDataset, type DataCursor, type PromptSampler, type RlExample } from '../data/dataset.ts';
import { BUILTIN_TASKS, type BuiltinTask } from '../tasks/builtin-tasks.ts';
import { warmStartBuiltinActor, withTotalSteps, type WarmStartProgress } from '../tasks/default-job.ts';
import type { CorpusDocument, Retriever } from '../environments/search/retriever.ts';
import { retrieverFromConfig, searchProtocol } from '../environments/search/search-protocol.ts';
import type { SearchProtocol } from '../environments/search/search-turns.ts';
import type { ToolAgent } from '../environments/tool-agent/tool-agent.ts';
import type { SftStepResult } from '../sft/sft-trainer.ts';
import { computeScore, toRewardScore, type RewardFunction, type RewardScore } from '../rewards/index.ts';
import type { ModelWeights, PromptRecord, TrainerIo } from '../trainer.ts';
import { endTokenIds } from '../generation/types.ts';

export interface BuiltinRun {
  tokenizer: Tokenizer;
  /** tokenizer.json and tokenizer_config.json, written beside every saved model so it is a complete HF directory. */
  tokenizerFiles: Record<string, string>;
  train: RlExample[];
  val: RlExample[];
  actor: ModelWeights;
  critic: ModelWeights | null;
  reward: RewardFunction;
  /** do_search: the search protocol of the run. */
  search: SearchProtocol | null;
  warmStart: SftStepResult[];
}

/** The built-in task data.builtin_task names. */
export function builtinTask(config: PpoConfig): BuiltinTask {
  return BUILTIN_TASKS[config.data.builtin_task];
}

/** A built-in task's tokenizer, chat template and the files that describe them. */
export function builtinTokenizer(task: BuiltinTask): {
  tokenizer: Tokenizer;
  template: ChatTemplate;
  files: Record<string, string>;
} {
  const { tokenizerJson, tokenizerConfig } = task.tokenizerFiles();
  const tokenizer = JsTokenizer.fromJson(tokenizerJson, tokenizerConfig);
  return {
    tokenizer,
    template: new ChatTemplate(tokenizerConfig, tokenizer.special),
    files: {
      'tokenizer.json': JSON.stringify(tokenizerJson),
      'tokenizer_config.json': JSON.stringify(tokenizerConfig, null, 2),
    },
  };
}

/**
 * A built-in task's train/validation prompts, tokenized with the chat template (seeded by data.seed), and its corpus.
 */
export async function builtinDataset(
  config: PpoConfig,
  task: BuiltinTask,
  tokenizer: Tokenizer,
  template: ChatTemplate,
  valSize = task.valSize,
): Promise<{ train: RlExample[]; val: RlExample[]; corpus: CorpusDocument[] | null }> {
  const options = { ...config.data, tokenizer, template };
  const records = task.records(config.data.seed, valSize);
  return {
    train: (await buildRlDataset(records.train, options)).examples,
    val: (await buildRlDataset(records.val, options)).examples,
    corpus: records.corpus,
  };
}

/** The built-in actor after the task's warm-start stages (seeded by trainer.seed). */
export async function warmStartedBuiltinActor(
  engine: Engine,
  config: PpoConfig,
  task: BuiltinTask,
  tokenizer: Tokenizer,
  train: readonly RlExample[],
  retriever: Retriever | null,
  options: Pick<BuiltinRunOptions, 'warmStart' | 'onWarmStartStep'> = {},
): Promise<{ actor: ModelWeights; history: SftStepResult[] }> {
  const seed = config.trainer.seed;
  const stages = await task.warmStart(train, seed + 1, retriever, config.retriever.topk);
  const steps = options.warmStart?.steps;
  const padId = tokenizer.special.pad?.id ?? 0;
  const warm = await warmStartBuiltinActor(
    engine,
    {
      stages: steps === undefined ? stages : withTotalSteps(stages, steps),
      batchSize: options.warmStart?.batchSize ?? task.warmStartBatchSize,
      seed,
    },
    { vocabSize: tokenizer.vocabSize, padId },
    options.onWarmStartStep ?? (() => {}),
  );
  return { actor: { config: warm.config, params: warm.params }, history: warm.history };
}

export interface BuiltinRunOptions {
  /** Held-out prompts; the demo uses fewer than `node train.js`. */
  valSize?: number;
  /** Warm-start settings over the task's own: `steps` in all, shared among its stages in their proportions. */
  warmStart?: { steps?: number; batchSize?: number };
  onWarmStartStep?: (result: SftStepResult, progress: WarmStartProgress) => void;
  /** The built-in model already warm-started, loaded by the caller from actor_rollout_ref.model.path: no warm start. */
  actor?: ModelWeights;
}

export async function setUpBuiltinRun(
  engine: Engine,
  config: PpoConfig,
  options: BuiltinRunOptions = {},
): Promise<BuiltinRun> {
  if (config.data.train_files !== null || config.data.val_files !== null || config.retriever.corpus_path !== null) {
    throw new Error(
      'setUpBuiltinRun: the built-in run needs data.train_files, data.val_files and retriever.corpus_path all null',
    );
  }
  const modelPath = config.actor_rollout_ref.model.path;
  if ((modelPath !== null) !== (options.actor !== undefined)) {
    throw new Error(
      `setUpBuiltinRun: actor_rollout_ref.model.path is ${JSON.stringify(modelPath)} but the model loaded from it ` +
        `was ${options.actor ? '' : 'not '}given; both or neither`,
    );
  }
  const task = builtinTask(config);
  const { tokenizer, template, files } = builtinTokenizer(task);
  if (options.actor && options.actor.config.vocabSize < tokenizer.vocabSize) {
    throw new Error(
      `actor_rollout_ref.model.path ${modelPath}: vocab_size ${options.actor.config.vocabSize} is below the ` +
        `${config.data.builtin_task} tokenizer's ${tokenizer.vocabSize}`,
    );
  }
  const { train, val, corpus } = await builtinDataset(config, task, tokenizer, template, options.valSize);
  const retriever = config.do_search
    ? retrieverFromConfig(
        config.retriever,
        corpus && { documents: corpus, source: `built-in ${config.data.builtin_task} corpus` },
      )
    : null;
  const { actor, history } = options.actor
    ? { actor: options.actor, history: [] }
    : await warmStartedBuiltinActor(engine, config, task, tokenizer, train, retriever, options);
  const critic = usesCritic(config)
    ? await criticFromCausalLm(engine, actor.config, actor.params, config.trainer.seed)
    : null;
  const reward: RewardFunction = (dataSource, text, groundTruth, extraInfo) =>
    computeScore(dataSource, text, groundTruth, extraInfo);
  const search = retriever && searchProtocol(config, retriever, tokenizer, task.search);
  return { tokenizer, tokenizerFiles: files, train, val, actor, critic, reward, search, warmStart: history };
}

/** The score of one response under a run's reward function, with what else the function returned. */
export async function scoreResponse(
  reward: RewardFunction,
  prompt: Pick<PromptRecord, 'dataSource' | 'groundTruth' | 'extraInfo'>,
  text: string,
): Promise<RewardScore> {
  return toRewardScore(
    await reward(prompt.dataSource, text, prompt.groundTruth, prompt.extraInfo),
    `reward (data_source ${prompt.dataSource})`,
  );
}

export function toPromptRecord(example: RlExample): PromptRecord {
  return {
    promptIds: example.promptIds,
    dataSource: example.dataSource,
    groundTruth: example.groundTruth,
    extraInfo: example.extraInfo,
  };
}

/** The trainer's view of a run: batches from `sampler` starting at `start`, the validation set, decode and score. */
export function runTrainerIo(
  run: Pick<BuiltinRun, 'tokenizer' | 'train' | 'val' | 'actor' | 'reward' | 'search'> & {
    generationConfig?: { eosTokenIds: readonly number[] } | null;
    toolAgent?: ToolAgent | null;
  },
  sampler: PromptSampler,
  start: DataCursor = { epoch: 0, index: 0 },
): { io: TrainerIo; cursor: () => DataCursor } {
  let cursor = start;
  const io: TrainerIo = {
    nextTrainBatch: () => {
      const batch = sampler.batchAt(cursor);
      cursor = batch.next;
      return batch.indices.map((i) => toPromptRecord(run.train[i]));
    },
    validationSet: () => run.val.map(toPromptRecord),
    // Search-R1 keeps special tokens in the text it scores: its tags may be special tokens of the vocabulary.
    decode: (ids) => run.tokenizer.decode(ids, { skipSpecialTokens: run.search === null }),
    score: (prompt, text) => scoreResponse(run.reward, prompt, text),
    ...endTokenIds(run.actor.config, run.generationConfig ?? null, run.tokenizer),
    search: run.search,
    toolAgent: run.toolAgent ?? null,
  };
  return { io, cursor: () => cursor };
}
