// Assembles a run from its configuration (Node: reads model directories and data files): tokenizer and chat
// template, training and validation prompts, actor (loaded, or the built-in model with its warm start),
// critic, and the reward function.
import { readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { checkpointModelPath } from '../run-directory/checkpoint-node.ts';
import type { Arena, Engine } from '../../engine/index.ts';
import type { PpoConfig } from '../config.ts';
import {
  usesCritic,
  actorLoraSettings,
  criticLoraSettings,
  weightDtype,
  actorBaseStorage,
  frozenStorage,
} from '../config.ts';
import { headEntries, isQuantized } from '../../models/parameter-layout.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { restoredParameters, storedParameterCopy } from '../../models/parameter-store.ts';
import { CheckpointError, readGenerationConfig, type GenerationConfig } from '../../models/checkpoint-io-node.ts';
import { networkDifferences, parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { criticFromCausalLm } from '../../models/critic-init.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues } from '../../models/lora.ts';
import { loadLoraAdapter } from '../../models/lora-files-node.ts';
import type { Tokenizer } from '../../models/tokenizer.ts';
import { loadTokenizer, readTokenizerFiles } from '../../models/tokenizer-node.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import type { RlExample } from '../data/dataset.ts';
import { loadRlDataset } from '../data/dataset-node.ts';
import { builtinDataset, builtinTask, builtinTokenizer, warmStartedBuiltinActor } from './builtin-run.ts';
import type { CorpusDocument, Retriever } from '../environments/search/retriever.ts';
import { loadCorpus } from '../environments/search/corpus-node.ts';
import { retrieverFromConfig, searchProtocol } from '../environments/search/search-protocol.ts';
import type { SearchProtocol } from '../environments/search/search-turns.ts';
import { toolAgentSettings, type ToolAgent } from '../environments/tool-agent/tool-agent.ts';
import { loadTools } from '../environments/tool-agent/tool-loader-node.ts';
import type { SftStepResult } from '../sft/sft-trainer.ts';
import type { WarmStartProgress } from '../tasks/default-job.ts';
import { computeScore, type RewardFunction } from '../rewards/index.ts';
import { builtinRewardModule, loadCustomRewardFunction } from '../rewards/custom-reward-node.ts';
import type { ModelWeights } from '../trainer.ts';
import { checkRewardsCanScore, checkModelFitsRun } from './input-checks.ts';
import { planDistillation } from '../algorithm/distillation.ts';

export interface RunSetup {
  tokenizer: Tokenizer;
  /** Files to write beside every saved model so it is a complete HF directory. */
  tokenizerFiles: Record<string, string>;
  train: RlExample[];
  val: RlExample[];
  actor: ModelWeights;
  /** The actor directory's generation_config.json: its eos_token_id list also ends responses (as vLLM reads it),
   *  and saved actors carry the file as read (Qwen's sampling defaults included). */
  generationConfig: GenerationConfig | null;
  critic: ModelWeights | null;
  reward: RewardFunction;
  /** actor_rollout_ref.ref.load_in_4bit / load_in_8bit: the reference, the initial actor quantized on the host (the
   *  trainer copies a float or half reference on the device itself); null otherwise and on resume. */
  reference: Arena | null;
  /** reward_model.enable: the *ForSequenceClassification that scores responses. */
  rewardModel: ModelWeights | null;
  /** distillation.enabled: the frozen teachers, in the order ppo/algorithm/distillation.ts resolves them. */
  teachers: ModelWeights[];
  /** do_search: the search protocol of the run. */
  search: SearchProtocol | null;
  /** multi_turn.enable: verl's tool agent loop over the tools of multi_turn.tool_config_path. */
  toolAgent: ToolAgent | null;
  /** Set when the built-in actor was warm-started. */
  warmStart: SftStepResult[] | null;
  /** What loading changed that the user should read (rows dropped by filtering). */
  notes: string[];
}

/** The query of the start-up probe: any text the retrieval server can answer. */
const PROBE_QUERY = 'what is the capital of france';

/**
 * do_search with retriever.url: one search before any model loads or the run directory is touched, so a server
 * that is down or answers in another shape stops the run now, not at the model's first search (maybe never).
 */
async function probeRetriever(url: string, retriever: Retriever, topk: number): Promise<void> {
  try {
    await retriever.search([PROBE_QUERY], topk);
  } catch (err) {
    throw new Error(
      `retriever.url=${url}: the start-up probe (one search for "${PROBE_QUERY}") failed — ` +
        `${(err as Error).message}; ` +
        'start the retrieval server (node tools/retrieval-server.js) or correct retriever.url',
    );
  }
}

async function tokenizerOf(
  config: PpoConfig,
): Promise<{ tokenizer: Tokenizer; template: ChatTemplate; files: Record<string, string> }> {
  const dir = config.data.tokenizer ?? config.actor_rollout_ref.model.path;
  if (dir === null) return builtinTokenizer(builtinTask(config));
  const files = await readTokenizerFiles(dir);
  const tokenizer = await loadTokenizer(dir, 'native');
  const copied: Record<string, string> = { 'tokenizer.json': files.tokenizerJson };
  for (const name of ['tokenizer_config.json', 'special_tokens_map.json', 'chat_template.jinja']) {
    try {
      copied[name] = await readFile(join(dir, name), 'utf8');
    } catch {
      // Optional files: a tokenizer works without them.
    }
  }
  const custom = config.actor_rollout_ref.model.custom_chat_template;
  if (custom !== null) copied['chat_template.jinja'] = custom;
  return {
    tokenizer,
    template: new ChatTemplate(files.config, tokenizer.special, custom ?? files.chatTemplateFile),
    files: copied,
  };
}

/** A Hub id such as Qwen/Qwen2.5-0.5B-Instruct, which verl's examples pass as a model path. */
const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

/**
 * The model and tokenizer directories the configuration names, checked before a device is created: verl downloads
 * a Hub id given as a path; this engine reads local directories only, so a missing one says how to get it.
 */
export async function checkModelDirectories(config: PpoConfig): Promise<string[]> {
  const paths: [string, string | null][] = [
    ['actor_rollout_ref.model.path', config.actor_rollout_ref.model.path],
    ['critic.model.path', usesCritic(config) ? config.critic.model.path : null],
    ['reward_model.model.path', config.reward_model.enable ? config.reward_model.model.path : null],
    ['data.tokenizer', config.data.tokenizer],
    ['actor_rollout_ref.model.lora_adapter_path', config.actor_rollout_ref.model.lora_adapter_path],
    ...(planDistillation(config)?.teachers ?? []).map((t): [string, string] => [
      `distillation.teacher_models.${t.name}.model_path`,
      t.modelPath,
    ]),
  ];
  const problems: string[] = [];
  // critic.model.path defaults to the actor's: one missing directory is one problem, named by its first key.
  const checked = new Set<string>();
  for (const [key, path] of paths) {
    if (path === null || checked.has(path)) continue;
    checked.add(path);
    if (
      await stat(path).then(
        (s) => s.isDirectory(),
        () => false,
      )
    )
      continue;
    problems.push(
      `${key}=${path}: no such directory${
        HUB_ID.test(path)
          ? ` — a Hugging Face Hub id? This engine reads local model directories only (no download): ` +
            `\`huggingface-cli download ${path} --local-dir DIR\`, then ${key}=DIR`
          : ''
      }`,
    );
  }
  return problems;
}

/** data.train_max_samples / val_max_samples: the first `max` examples; -1 keeps all. */
function firstSamples(examples: RlExample[], max: number): RlExample[] {
  return max < 0 ? examples : examples.slice(0, max);
}

/**
 * Auto-resume continues a checkpoint only of the configured model: same architecture (when
 * actor_rollout_ref.model.path names one) and same tokenizer; otherwise the run stops and says how to start over.
 */
export async function assertResumable(
  config: PpoConfig,
  checkpointDir: string,
  checkpointActor: DecoderConfig,
): Promise<void> {
  const startOver =
    `resume another way: trainer.resume_mode=disable (start fresh), or a different ` +
    `trainer.default_local_dir / trainer.experiment_name`;
  const modelPath = config.actor_rollout_ref.model.path;
  if (modelPath !== null) {
    const configured = parseHfConfig(
      JSON.parse(await readFile(join(modelPath, 'config.json'), 'utf8')),
      join(modelPath, 'config.json'),
    );
    const differences = networkDifferences(checkpointActor, configured);
    if (differences.length > 0) {
      throw new Error(
        `resume: the checkpoint ${checkpointDir} holds a different model than ` +
          `actor_rollout_ref.model.path=${modelPath} (${differences.join(', ')}) — ${startOver}`,
      );
    }
    // The same network from another directory (another fine-tune, another revision) is still another model.
    const trainedFrom = await checkpointModelPath(checkpointDir);
    if (trainedFrom !== null && trainedFrom !== resolve(modelPath))
      throw new Error(
        `resume: the checkpoint ${checkpointDir} was trained from actor_rollout_ref.model.path=${trainedFrom}, this ` +
          `run has ${resolve(modelPath)} — ${startOver}`,
      );
  }
  const { files } = await tokenizerOf(config);
  const saved = await readFile(join(checkpointDir, 'actor', 'tokenizer.json'), 'utf8').catch(() => null);
  if (saved !== null && saved !== files['tokenizer.json']) {
    const source = config.data.tokenizer ?? modelPath ?? `the built-in ${config.data.builtin_task} task`;
    throw new Error(
      `resume: the checkpoint ${checkpointDir} was trained with a different tokenizer than ${source} — ${startOver}`,
    );
  }
}

export async function setUpRun(
  engine: Engine,
  config: PpoConfig,
  resumed: { actor: ModelWeights; critic: ModelWeights | null } | null,
  onWarmStartStep: (r: SftStepResult, progress: WarmStartProgress) => void,
): Promise<RunSetup> {
  const { tokenizer, template, files } = await tokenizerOf(config);
  const toolAgent = await toolAgentOf(config, tokenizer, template);
  const datasetOptions = { ...config.data, tokenizer, template, tools: toolAgent?.schemas ?? null };
  const builtin =
    config.data.train_files === null ? await builtinDataset(config, builtinTask(config), tokenizer, template) : null;
  const notes: string[] = [];
  // As verl prints the dataset's size after filtering: dropped rows are never silent.
  const loadData = async (key: string, files: string | string[]): Promise<RlExample[]> => {
    const { examples, filtered } = await loadRlDataset(files, datasetOptions);
    if (filtered > 0) {
      notes.push(
        `${key}: filtered ${filtered} of ${filtered + examples.length} prompts longer than ` +
          `data.max_prompt_length=${config.data.max_prompt_length} tokens ` +
          `(data.filter_overlong_prompts=true); ${examples.length} left`,
      );
    }
    return examples;
  };
  const train = firstSamples(
    builtin ? builtin.train : await loadData('data.train_files', config.data.train_files!),
    config.data.train_max_samples,
  );
  const valFiles = config.data.val_files;
  const val = firstSamples(
    valFiles !== null ? await loadData('data.val_files', valFiles) : (builtin?.val ?? []),
    config.data.val_max_samples,
  );
  checkRewardsCanScore(config, [...train, ...val]);
  const retriever = config.do_search
    ? retrieverFromConfig(config.retriever, await corpusOf(config, builtin?.corpus ?? null))
    : null;
  if (retriever && config.retriever.url !== null)
    await probeRetriever(config.retriever.url, retriever, config.retriever.topk);

  let actor: ModelWeights;
  let warmStart: SftStepResult[] | null = null;
  const actorPath = config.actor_rollout_ref.model.path;
  if (resumed) {
    actor = resumed.actor;
  } else if (actorPath !== null) {
    const loaded = await loadModel(engine, actorPath, {
      label: 'actor',
      weightDtype: (dtype) => actorBaseStorage(config, dtype),
    });
    if (loaded.config.head !== 'causal-lm')
      throw new Error(
        `actor_rollout_ref.model.path: ${actorPath} holds a ${loaded.config.architecture}, expected a *ForCausalLM`,
      );
    actor = { config: loaded.config, params: loaded.params };
  } else {
    if (!builtin)
      throw new Error(
        'actor_rollout_ref.model.path is null (the built-in model) but data.train_files is set: the built-in model ' +
          'only knows the built-in task; give a model path',
      );
    const warm = await warmStartedBuiltinActor(engine, config, builtinTask(config), tokenizer, train, retriever, {
      onWarmStartStep,
    });
    // The warm start trains float32 weights; a LoRA run then stores its frozen base as a loaded one would be.
    actor = {
      ...warm.actor,
      params: await restoredParameters(
        engine,
        warm.actor.config,
        warm.actor.params,
        actorBaseStorage(config, warm.actor.config.torchDtype),
      ),
    };
    warmStart = warm.history;
  }

  checkModelFitsRun(config, actor.config, tokenizer);
  if (!resumed) actor.lora = await actorLoraAdapters(engine, config, actor.config);
  const referenceStorage = frozenStorage(config, 'reference', actor.config.torchDtype);
  // config checks refuse ref.load_in_* without a reference (no KL term, or LoRA, where the base is the reference).
  const reference =
    !resumed && isQuantized(referenceStorage)
      ? await storedParameterCopy(engine, actor.config, actor.params, 'reference', referenceStorage)
      : null;

  let critic: ModelWeights | null = null;
  if (resumed && usesCritic(config)) {
    if (!resumed.critic)
      throw new Error('resume: the checkpoint has no critic, but algorithm.adv_estimator=gae needs one');
    critic = resumed.critic;
  } else if (usesCritic(config)) {
    const criticPath = config.critic.model.path;
    if (criticPath !== null && criticPath !== actorPath) {
      const loaded = await loadModel(engine, criticPath, {
        as: 'token-classification',
        label: 'critic',
        seed: config.trainer.seed,
        weightDtype: (dtype) => weightDtype(config, 'critic', dtype),
      });
      critic = { config: loaded.config, params: loaded.params };
    } else {
      critic = await criticFromCausalLm(
        engine,
        actor.config,
        actor.params,
        config.trainer.seed,
        weightDtype(config, 'critic', actor.config.torchDtype),
      );
    }
    critic.lora = await criticLoraAdapters(engine, config, critic);
  }

  const custom = config.custom_reward_function.path;
  const verlModule = custom === null ? null : builtinRewardModule(custom);
  const scorer: RewardFunction =
    custom === null
      ? (dataSource, text, groundTruth, extraInfo) => computeScore(dataSource, text, groundTruth, extraInfo)
      : (verlModule ??
        (await loadCustomRewardFunction({
          path: custom,
          name: config.custom_reward_function.name,
          timeout: config.custom_reward_function.timeout,
        })));
  // verl's gdpo reward manager hands every call extra_info.experiment_name.
  const reward: RewardFunction =
    config.reward_model.reward_manager === 'gdpo'
      ? (dataSource, text, groundTruth, extraInfo) =>
          scorer(dataSource, text, groundTruth, { ...extraInfo, experiment_name: config.trainer.experiment_name })
      : scorer;
  let rewardModel: ModelWeights | null = null;
  if (config.reward_model.enable) {
    const loaded = await loadModel(engine, config.reward_model.model.path!, {
      label: 'reward_model',
      weightDtype: (dtype) => frozenStorage(config, 'reward_model', dtype),
    });
    rewardModel = { config: loaded.config, params: loaded.params };
  }
  const teachers = await loadTeachers(engine, config, actorPath, actor.config, files);
  // Observations in Search-R1's words, unless the built-in task's small vocabulary needs its own.
  const builtinVocabulary = (config.data.tokenizer ?? actorPath) === null;
  const search =
    retriever && searchProtocol(config, retriever, tokenizer, builtinVocabulary ? builtinTask(config).search : null);
  const generationConfig = actorPath === null ? null : await readGenerationConfig(actorPath);
  return {
    tokenizer,
    tokenizerFiles: files,
    train,
    val,
    actor,
    generationConfig,
    critic,
    reward,
    reference,
    rewardModel,
    teachers,
    search,
    toolAgent,
    warmStart,
    notes,
  };
}

/** distillation.enabled: each teacher, frozen in its checkpoint's dtype, refused in one line unless it is a
 *  *ForCausalLM with the student's tokenizer (the same tokenizer.json vocabulary and added tokens where the teacher
 *  directory has one, and the same vocabulary size): its log-probs must be of the student's token ids. */
async function loadTeachers(
  engine: Engine,
  config: PpoConfig,
  actorPath: string | null,
  actorConfig: DecoderConfig,
  studentTokenizer: Record<string, string>,
): Promise<ModelWeights[]> {
  const teachers: ModelWeights[] = [];
  const student = config.data.tokenizer ?? actorPath ?? 'the built-in model';
  for (const { name, modelPath } of planDistillation(config)?.teachers ?? []) {
    const key = `distillation.teacher_models.${name}.model_path`;
    const teacherJson = await readFile(join(modelPath, 'tokenizer.json'), 'utf8').catch(() => null);
    const loaded = await loadModel(engine, modelPath, {
      label: `teacher ${name}`,
      weightDtype: (dtype) => weightDtype(config, 'teacher', dtype),
    });
    if (loaded.config.head !== 'causal-lm')
      throw new Error(`${key}: ${modelPath} holds a ${loaded.config.architecture}, expected a *ForCausalLM`);
    const sameVocabulary =
      loaded.config.vocabSize === actorConfig.vocabSize &&
      (teacherJson === null || vocabularyOf(teacherJson) === vocabularyOf(studentTokenizer['tokenizer.json']));
    if (!sameVocabulary)
      throw new Error(
        `${key}=${modelPath}: its tokenizer differs from the student's (${student}); teacher and student must ` +
          `share a tokenizer`,
      );
    teachers.push({ config: loaded.config, params: loaded.params });
  }
  return teachers;
}

/** A tokenizer.json's vocabulary and added tokens, as one comparable string. */
function vocabularyOf(tokenizerJson: string): string {
  const parsed = JSON.parse(tokenizerJson) as { model?: { vocab?: unknown }; added_tokens?: unknown };
  return JSON.stringify([parsed.model?.vocab ?? null, parsed.added_tokens ?? null]);
}

/** LoRA (verl: lora_rank > 0 or a lora_adapter_path): a PEFT adapter to start from, or fresh adapters (PEFT's
 *  initialisation, seeded by trainer.seed); null without LoRA. */
async function actorLoraAdapters(
  engine: Engine,
  config: PpoConfig,
  actorConfig: DecoderConfig,
): Promise<LoraAdapters | null> {
  const { lora_adapter_path: path, lora_rank: rank } = config.actor_rollout_ref.model;
  if (path !== null) {
    const adapters = await loadLoraAdapter(engine, path, actorConfig, 'actor');
    if (rank > 0 && rank !== adapters.settings.rank) {
      throw new CheckpointError(
        `actor_rollout_ref.model.lora_rank=${rank} but the adapter at lora_adapter_path=${path} has ` +
          `r=${adapters.settings.rank} — set lora_rank=${adapters.settings.rank} or leave it at 0`,
      );
    }
    return adapters;
  }
  const settings = actorLoraSettings(config);
  return (
    settings &&
    new LoraAdapters(
      engine,
      actorConfig,
      settings,
      initialLoraValues(actorConfig, settings, config.trainer.seed),
      'actor',
    )
  );
}

/** Critic LoRA (critic.model.lora_rank > 0): fresh adapters (PEFT's initialisation, seeded by trainer.seed) with the
 *  critic's `score` beside them (PEFT's modules_to_save: it trains, starting from the loaded head); null without. */
async function criticLoraAdapters(
  engine: Engine,
  config: PpoConfig,
  critic: ModelWeights,
): Promise<LoraAdapters | null> {
  const settings = criticLoraSettings(config);
  if (!settings) return null;
  const values = initialLoraValues(critic.config, settings, config.trainer.seed);
  const head = headEntries(critic.config);
  for (const { name } of head) values.set(name, await engine.read(critic.params.get(name)));
  return new LoraAdapters(engine, critic.config, settings, values, 'critic', head);
}

/** The BM25 corpus: retriever.corpus_path, else the built-in task's; null when retriever.url serves instead. */
async function corpusOf(
  config: PpoConfig,
  builtinCorpus: CorpusDocument[] | null,
): Promise<{ documents: CorpusDocument[]; source: string } | null> {
  const path = config.retriever.corpus_path;
  if (config.retriever.url !== null) return null;
  if (path !== null) return { documents: await loadCorpus(path), source: path };
  return builtinCorpus && { documents: builtinCorpus, source: `built-in ${config.data.builtin_task} corpus` };
}

/**
 * multi_turn.enable: the tools of multi_turn.tool_config_path (none when it is null, as verl) and the loop's limits.
 */
async function toolAgentOf(
  config: PpoConfig,
  tokenizer: RunSetup['tokenizer'],
  template: ChatTemplate,
): Promise<ToolAgent | null> {
  const multiTurn = config.actor_rollout_ref.rollout.multi_turn;
  if (!multiTurn.enable) return null;
  const tools = multiTurn.tool_config_path === null ? [] : await loadTools(multiTurn.tool_config_path);
  return {
    tools: new Map(tools.map((t) => [t.name, t])),
    schemas: tools.map((t) => t.schema),
    settings: toolAgentSettings(config),
    tokenizer,
    template,
  };
}
