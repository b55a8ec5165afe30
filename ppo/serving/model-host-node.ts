// The served model (Node: reads checkpoint, tokenizer and adapter directories): its weights on the device, its
// tokenizer and chat template, the LoRA adapters loaded by name, and the scheduler whose decode loops run on
// them. Weight updates and adapter changes run as the scheduler's exclusive work, between requests.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/index.ts';
import { loadModel, reloadModel } from '../../models/model-files-node.ts';
import { readGenerationConfig } from '../../models/checkpoint-io-node.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import type { LoraAdapters } from '../../models/lora-adapters.ts';
import { loadLoraAdapter } from '../../models/lora-files-node.ts';
import type { Tokenizer } from '../../models/tokenizer.ts';
import { loadTokenizer, readTokenizerFiles } from '../../models/tokenizer-node.ts';
import { ChatTemplate, applyChatTemplate, type ChatMessage } from '../../models/chat-template.ts';
import type { Arena, FloatDType } from '../../engine/index.ts';
import { RolloutDecoders } from '../generation/decoders.ts';
import { continuousCacheCapacity, decodeContinuous, type SampleQueue } from '../generation/continuous-batching.ts';
import { rolloutSlots } from '../generation/slots.ts';
import { PromptScorer, type PromptScores, type ScoreOptions } from '../generation/prompt-scoring.ts';
import { DEFAULT_READ_EVERY, endTokenIds } from '../generation/types.ts';
import { ApiError } from './api-error.ts';
import { MAX_TOP_LOGPROBS } from '../../kernels/decode/top-logprobs.ts';
import {
  checkPromptIds,
  generationConfigDefaults,
  type GenerationRequest,
  type PromptInput,
  type SamplingDefaults,
  type ServerLimits,
} from './generation-request.ts';
import { Scheduler, type PromptScoreSink, type SampleObserver, type SampleResult } from './scheduler.ts';
import { ServeCounters } from './counters.ts';
import { servedDtypes, type KvCacheDtype, type ServeDtype } from './serve-dtype.ts';
import type { PolicyWeights } from '../generation/types.ts';

export interface ServeOptions {
  modelDir: string;
  /** The name /v1/models lists and requests' `model` may give (vLLM's --served-model-name). */
  servedModelName: string;
  maxPromptTokens: number;
  maxNewTokens: number;
  /** Samples decoded at once, at most (the device's limits may allow fewer). */
  maxSlots: number;
  /** Samples one request may ask for. */
  maxRequestSamples: number;
  /**
   * Fraction of the device memory (engine.memory) the decode batch may take (verl's rollout.gpu_memory_utilization).
   */
  gpuMemoryUtilization: number;
  /** vLLM's --max-logprobs: the most alternatives a request's log-probs may have (-1: the whole vocabulary). */
  maxLogprobs: number;
  /** vLLM's --dtype: the served weights' storage (serve-dtype.ts). */
  dtype: ServeDtype;
  /** vLLM's --kv-cache-dtype: the KV cache's storage. */
  kvCacheDtype: KvCacheDtype;
}

/**
 * The decode loop reads the sampled ids after every step and acts on each read at most this many steps later: the
 * host sees a sample end one step after its last token (the GPU has the next step queued meanwhile), a waiting
 * request takes its row at once, its response leaves, and the client's next request takes a row at the step after
 * it arrives. With the rollout's cadence (reads every 8 steps, acted on 8 later, requests admitted at reads only)
 * a row stood empty 8-24 steps per sample.
 */
const SERVER_READ_LAG = 1;
/**
 * A request that finds a row free while others decode waits up to this many steps for more requests, so that
 * requests arriving a few steps apart (a client's batch, closed-loop clients answered at the same step) are
 * prefilled as one group: one forward pass instead of several, and samples with equal budgets end together again.
 */
const SERVER_GATHER_STEPS = 2;
/** The rollout's read interval, which the decode cache's capacity allows for (reads lag one interval). */
const SERVER_READ_EVERY = DEFAULT_READ_EVERY;
/**
 * A row left empty with none waiting is dropped after this many steps, with every other empty row (the loop's
 * emptyRowSteps): a closed-loop client's next request comes within a step or two of its response, and an empty row
 * decoded longer costs more than the compaction and the new row a later request takes (8 steps: 5% more server CPU
 * per token at ~24-token answers, docs/benchmarks.md).
 */
const SERVER_EMPTY_ROW_STEPS = 3;
/** Lets the event loop turn between two decode steps: requests arrive, responses and streamed tokens leave. */
const turnEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * How much a tokenizer's normalizer may shrink a text (accents stripped, sequences composed) before tokens cover it.
 */
const NORMALIZER_MARGIN = 4;

/**
 * Bytes of text that --max-prompt-tokens tokens can cover, at most: each token's text has no more bytes than its
 * vocabulary entry (byte-level BPE spells a byte as one character, SentencePiece a space as "▁" and a byte as
 * "<0x0A>", WordPiece a word's middle as "##…"), times the normalizer's margin. A tokenizer that drops text
 * (whitespace between BERT's words) could fit more; such a prompt is refused, as the docs say.
 */
export function promptByteLimit(tokenizerJson: string, maxPromptTokens: number): number {
  const json = JSON.parse(tokenizerJson) as {
    model?: { vocab?: Record<string, number> | [string, number][]; max_input_chars_per_word?: number };
    added_tokens?: { content: string }[];
  };
  const vocab = json.model?.vocab;
  const pieces = [
    ...(Array.isArray(vocab) ? vocab.map(([piece]) => piece) : Object.keys(vocab ?? {})),
    ...(json.added_tokens ?? []).map((t) => t.content),
  ];
  // WordPiece's unknown token stands for a whole word of up to max_input_chars_per_word characters (4 bytes each).
  const unknownWord = 4 * (json.model?.max_input_chars_per_word ?? 0);
  const longest = pieces.reduce((m, p) => Math.max(m, Buffer.byteLength(p)), Math.max(1, unknownWord));
  return maxPromptTokens * longest * NORMALIZER_MARGIN;
}

/** A request's prompt scores as its prefills deliver them (Scheduler's PromptScoreSink), all prompts' at once. */
export class PrefillScores implements PromptScoreSink {
  readonly scores: Promise<PromptScores[]>;
  private readonly resolvers: (((scores: Promise<PromptScores>) => void) | null)[] = [];

  constructor(
    readonly K: number,
    readonly options: (prompt: number) => ScoreOptions,
    prompts: number,
    /** Scores one prompt by the separate pass. */
    private readonly separately: (prompt: number) => Promise<PromptScores>,
  ) {
    this.scores = Promise.all(
      Array.from({ length: prompts }, (_, p) => new Promise<PromptScores>((resolve) => (this.resolvers[p] = resolve))),
    );
  }

  settle(prompt: number, scores: Promise<PromptScores> | null): void {
    const resolve = this.resolvers[prompt];
    if (!resolve) return;
    this.resolvers[prompt] = null;
    resolve(scores ?? this.separately(prompt));
  }
}

export class ModelHost {
  readonly limits: ServerLimits;
  readonly scheduler: Scheduler;
  /** What /metrics reports: requests answered, tokens generated, decode steps and their rows. */
  readonly counters = new ServeCounters();
  /** SGLang's weight_version: "default", then what each update names. */
  weightVersion = 'default';
  /** The directory whose weights are served now. */
  modelPath: string;
  private readonly adapters = new Map<string, { path: string; adapters: LoraAdapters }>();
  private decoders: { adapter: string | null; decoders: RolloutDecoders } | null = null;
  /** The prompt scorer (its own one-row decoder), for the weights of `adapter`. */
  private scorer: { adapter: string | null; scorer: PromptScorer } | null = null;
  private readonly capacity: number;
  private readonly slots: number;
  private readonly end: { eosTokenIds: number[]; padTokenId: number };
  private chatTemplate: ChatTemplate | Error | null = null;
  /** Bytes of text a prompt may have: more cannot tokenize within --max-prompt-tokens (promptByteLimit). */
  private readonly promptBytes: number;

  private constructor(
    readonly engine: Engine,
    readonly options: ServeOptions,
    readonly config: DecoderConfig,
    private readonly params: Arena,
    readonly tokenizer: Tokenizer,
    private readonly tokenizerJson: string,
    end: { eosTokenIds: number[]; padTokenId: number },
    /** generation_config.json's sampling defaults. */
    readonly sampling: { defaults: SamplingDefaults },
    /** The weights' and the KV cache's storage (--dtype, --kv-cache-dtype). */
    readonly dtypes: { weights: FloatDType; cache: FloatDType },
  ) {
    this.modelPath = options.modelDir;
    this.end = end;
    const { maxPromptTokens: P, maxNewTokens: R } = options;
    this.capacity = continuousCacheCapacity(P, R, SERVER_READ_EVERY);
    this.slots = rolloutSlots(
      engine.caps,
      config,
      // Continuous batching: prompts are prefilled in a decoder of their own (slots.ts).
      { promptLength: P, capacity: this.capacity, samples: options.maxSlots, cacheDtype: dtypes.cache },
      { maxSlots: options.maxSlots, memoryBudgetBytes: options.gpuMemoryUtilization * this.engine.memory.bytes },
    );
    this.limits = {
      maxPromptTokens: P,
      maxNewTokens: R,
      vocabSize: config.vocabSize,
      maxSamples: options.maxRequestSamples,
    };
    this.promptBytes = promptByteLimit(tokenizerJson, P);
    const decode = (ids: readonly number[]) => tokenizer.decode(ids, { skipSpecialTokens: true });
    this.scheduler = new Scheduler(
      (queue, adapter) => this.decodeLoop(queue, adapter),
      end.eosTokenIds,
      decode,
      () => this.counters.aborted(),
    );
  }

  static async open(engine: Engine, options: ServeOptions): Promise<ModelHost> {
    const dir = options.modelDir;
    const tokenizerJson = (await readTokenizerFiles(dir)).tokenizerJson;
    const tokenizer = await loadTokenizer(dir, 'native');
    let dtypes: { weights: FloatDType; cache: FloatDType } | null = null;
    // Half-precision weights are stored half from the start: the server never holds a float32 copy.
    const loaded = await loadModel(engine, dir, {
      label: 'served',
      weightDtype: (checkpointDtype) => {
        dtypes = servedDtypes(options.dtype, options.kvCacheDtype, checkpointDtype);
        return dtypes.weights;
      },
    });
    if (loaded.config.head !== 'causal-lm')
      throw new Error(`--model ${dir} holds a ${loaded.config.architecture}, expected a *ForCausalLM`);
    const { cache } = dtypes!;
    const kvWidth = loaded.config.numKvHeads * loaded.config.headDim;
    if (cache !== 'f32' && kvWidth % 4 !== 0)
      throw new Error(
        `${dir}: a ${cache} KV cache needs num_key_value_heads·head_dim (${kvWidth}) to be a multiple of 4; ` +
          'serve it with --dtype float32 and --kv-cache-dtype auto',
      );
    const generationConfig = await readGenerationConfig(dir);
    const end = endTokenIds(loaded.config, generationConfig, tokenizer);
    const sampling = {
      defaults: generationConfigDefaults(generationConfig?.raw ?? null, join(dir, 'generation_config.json')),
    };
    return new ModelHost(
      engine,
      options,
      loaded.config,
      loaded.params,
      tokenizer,
      tokenizerJson,
      end,
      sampling,
      dtypes!,
    );
  }

  /** Decode slots and the cache capacity each slot has. */
  get batch(): { slots: number; capacity: number } {
    return { slots: this.slots, capacity: this.capacity };
  }

  get loadedAdapters(): { name: string; path: string }[] {
    return [...this.adapters].map(([name, a]) => ({ name, path: a.path }));
  }

  hasAdapter(name: string): boolean {
    return this.adapters.has(name);
  }

  /**
   * Text prompts tokenized as vLLM and SGLang do (the tokenizer's special tokens added); ids as given. A text too
   * long to fit is refused before it is tokenized (checkPromptText).
   */
  tokenize(prompts: readonly PromptInput[], param: string): Promise<number[][]> {
    prompts.forEach((p, i) => {
      if ('text' in p) this.checkPromptText(p.text, prompts.length > 1 ? `${param}[${i}]` : param);
    });
    return Promise.all(prompts.map((p) => ('ids' in p ? p.ids : this.tokenizer.encode(p.text))));
  }

  /** A 400 in a few milliseconds for a text whose tokens would surely exceed --max-prompt-tokens. */
  checkPromptText(text: string, param: string): void {
    // UTF-16 units are at least a third of the UTF-8 bytes: most texts are decided without counting bytes.
    if (text.length * 3 <= this.promptBytes) return;
    const bytes = Buffer.byteLength(text);
    if (bytes > this.promptBytes)
      throw new ApiError(
        400,
        `${param}: the prompt has ${bytes} bytes of text, more than ${this.promptBytes} (this server's ` +
          `--max-prompt-tokens ${this.limits.maxPromptTokens} × the longest token's bytes × ${NORMALIZER_MARGIN})`,
        param,
      );
  }

  /** A chat's prompt ids: the model's chat template, rendered and encoded as apply_chat_template does. */
  async chatPrompt(
    messages: readonly ChatMessage[],
    addGenerationPrompt: boolean,
    kwargs: Record<string, unknown>,
  ): Promise<number[]> {
    if (this.chatTemplate === null) {
      try {
        const files = await readTokenizerFiles(this.options.modelDir);
        this.chatTemplate = new ChatTemplate(files.config, this.tokenizer.special, files.chatTemplateFile);
      } catch (err) {
        this.chatTemplate = err as Error;
      }
    }
    if (this.chatTemplate instanceof Error)
      throw new ApiError(
        400,
        `messages: ${this.options.modelDir} has no usable chat template (${this.chatTemplate.message}); use ` +
          `/v1/completions`,
        'messages',
      );
    try {
      return (await applyChatTemplate(this.tokenizer, this.chatTemplate, messages, { addGenerationPrompt, kwargs }))
        .ids;
    } catch (err) {
      throw new ApiError(400, `messages: the chat template cannot render them (${(err as Error).message})`, 'messages');
    }
  }

  /**
   * A request's checks against the served model, thrown at once (before a stream starts or a prompt is scored);
   * returns the budget. `param` names the prompt field in errors; a budget of 0 is allowed to a request that
   * reports its prompt (prompt log-probs, or OpenAI's echo).
   */
  check(
    request: GenerationRequest,
    promptIds: number[][],
    defaultMaxTokens: number,
    param: string,
    reportsPrompt = request.promptLogprobs !== null,
  ): number {
    const minTokens = reportsPrompt ? 0 : 1;
    const { maxTokens, n } = request;
    const budget = checkPromptIds(promptIds, maxTokens, defaultMaxTokens, n, this.limits, param, minTokens);
    const bad = request.stopTokenIds.find((id) => id < 0 || id >= this.config.vocabSize);
    if (bad !== undefined)
      throw new ApiError(
        400,
        `stop_token_ids: ${bad} is outside the vocabulary [0, ${this.config.vocabSize})`,
        'stop_token_ids',
      );
    const biased = [...request.processing.logitBias.keys()].find((id) => id >= this.config.vocabSize);
    if (biased !== undefined)
      throw new ApiError(
        400,
        `logit_bias: token id ${biased} is outside the vocabulary [0, ${this.config.vocabSize})`,
        'logit_bias',
      );
    this.checkLogprobCounts(request);
    this.adapterWeights(request.adapter);
    return budget;
  }

  /**
   * vLLM's --max-logprobs check: -1 asks for the whole vocabulary, and a count above the flag (default 20) is refused
   * in vLLM's words. Prompt log-probs take any count up to the vocabulary; a generated token's alternatives are at
   * most the decode loop's 20 (MAX_TOP_LOGPROBS).
   */
  private checkLogprobCounts(request: GenerationRequest): void {
    const V = this.config.vocabSize;
    const max = this.options.maxLogprobs === -1 ? V : this.options.maxLogprobs;
    const refuse = (what: 'prompt' | 'sample', count: number, param: string) => {
      const n = count === -1 ? V : count;
      if (n > max)
        throw new ApiError(400, `Requested ${what} logprobs of ${n}, which is greater than max allowed: ${max}`, param);
      return n;
    };
    if (request.promptLogprobs !== null) refuse('prompt', request.promptLogprobs, 'prompt_logprobs');
    const sample = refuse('sample', request.topLogprobs, 'top_logprobs');
    if (sample > MAX_TOP_LOGPROBS)
      throw new ApiError(
        400,
        `top_logprobs: ${sample} alternatives per generated token; this server computes at most ${MAX_TOP_LOGPROBS} ` +
          '(prompt_logprobs takes up to --max-logprobs)',
        'top_logprobs',
      );
  }

  /** A loaded adapter's weights (null: the base model's); an unknown name is a 400. */
  private adapterWeights(adapter: string | null): LoraAdapters | null {
    if (adapter === null) return null;
    const loaded = this.adapters.get(adapter);
    if (!loaded)
      throw new ApiError(
        400,
        `no LoRA adapter named ${JSON.stringify(adapter)} is loaded (loaded: ` +
          `${[...this.adapters.keys()].join(', ') || 'none'})`,
        'lora_path',
      );
    return loaded.adapters;
  }

  /**
   * Waits for every sample of a checked request (`budget` from check()); `signal` aborts it, `observer` sees its
   * tokens as they come. A budget of 0 (prompt log-probs only) decodes nothing: each sample ends at once.
   */
  generate(
    request: GenerationRequest,
    promptIds: number[][],
    budget: number,
    watch: { signal?: AbortSignal; observer?: SampleObserver; scores?: PrefillScores } = {},
  ): Promise<SampleResult[]> {
    if (budget === 0) {
      const results = promptIds.flatMap((_, prompt) =>
        Array.from({ length: request.n }, (): SampleResult => {
          const top = request.topLogprobs > 0 ? [] : null;
          return { prompt, tokens: [], logprobs: new Float32Array(0), top, reason: 'length' };
        }),
      );
      results.forEach((r, j) => watch.observer?.finished(j, r));
      return Promise.resolve(results);
    }
    const { temperature, topK, topP } = request;
    return this.scheduler.generate({
      prompts: promptIds,
      n: request.n,
      budget,
      sampling: { temperature, topK, topP, seed: request.seed.seed },
      sampleOffset: request.seed.sampleOffset,
      stopStrings: request.stop,
      stopTokenIds: request.stopTokenIds,
      adapter: request.adapter,
      topLogprobs: request.topLogprobs,
      processing: request.processing,
      signal: watch.signal,
      observer: watch.observer,
      scorePrompts: watch.scores,
    });
  }

  /**
   * The prompt scores of a request that also generates, out of its own prefills (one pass for score + generate; give
   * the handle to generate()): each prompt's first sample is prefilled alone, its every position's logits scored by
   * the prompt-logprobs kernel. A prompt whose sample ends before its prefill (the request aborted while it waited)
   * is scored by the separate pass.
   */
  prefillScores(request: GenerationRequest, promptIds: readonly number[][], options: (prompt: number) => ScoreOptions) {
    const K = request.promptLogprobs === -1 ? this.config.vocabSize : request.promptLogprobs!;
    return new PrefillScores(K, options, promptIds.length, (p) =>
      this.scorePrompts([promptIds[p]], K, request.adapter, () => options(p)).then(([scores]) => scores),
    );
  }

  /**
   * Each prompt's log-probs with K alternatives per position, on the device, with the weights a generation
   * queued now would run with: at once, or after the weight or adapter changes queued before it.
   */
  scorePrompts(
    promptIds: readonly number[][],
    K: number,
    adapter: string | null,
    options: (prompt: number) => ScoreOptions = () => ({}),
  ): Promise<PromptScores[]> {
    const score = () => {
      const lora = this.adapterWeights(adapter);
      if (this.scorer?.adapter !== adapter) {
        this.dropScorer();
        // Prompts, and a prompt with its response (token_ids_logprob's generated tokens).
        const capacity = this.limits.maxPromptTokens + this.limits.maxNewTokens;
        const scorer = new PromptScorer(this.engine, this.policy(lora), capacity);
        this.scorer = { adapter, scorer };
      }
      const scorer = this.scorer!.scorer;
      // -1: the whole vocabulary (vLLM's prompt_logprobs: -1).
      const count = K === -1 ? this.config.vocabSize : K;
      return Promise.all(promptIds.map((ids, i) => scorer.score(ids, count, options(i))));
    };
    return this.scheduler.exclusiveQueued ? this.scheduler.exclusive(score) : score();
  }

  /**
   * One short request through the whole decode loop (prefill, decode steps, sampling, a read), so that its
   * pipelines are compiled before the server listens: the first client waits for its own tokens only.
   */
  async warmUp(): Promise<void> {
    const prompt = Array.from({ length: Math.min(4, this.limits.maxPromptTokens) }, (_, i) => i);
    await this.scheduler.generate({
      prompts: [prompt],
      n: 1,
      budget: Math.min(this.limits.maxNewTokens, 2 * SERVER_READ_EVERY + 1),
      sampling: { temperature: 1, topK: -1, topP: 1, seed: 0 },
      sampleOffset: 0,
      stopStrings: [],
      stopTokenIds: [],
      adapter: null,
    });
  }

  /** SGLang's update_weights_from_disk: refused, with the reason, unless `dir` holds this network and tokenizer. */
  updateWeightsFromDisk(dir: string): Promise<void> {
    return this.scheduler.exclusive(async () => {
      const tokenizerJson = await readFile(join(dir, 'tokenizer.json'), 'utf8').catch(() => null);
      if (tokenizerJson !== null && tokenizerJson !== this.tokenizerJson)
        throw new ApiError(400, `${dir}/tokenizer.json is another tokenizer than the served model's`);
      await reloadModel(this.engine, dir, this.config, this.params, 'served');
      // The decoders keep transposed copies of the weights: rebuild them from the new ones.
      this.dropDecoders();
      this.dropScorer();
      this.modelPath = dir;
    });
  }

  loadLoraAdapter(name: string, dir: string): Promise<void> {
    return this.scheduler.exclusive(async () => {
      if (this.adapters.has(name))
        throw new ApiError(
          400,
          `a LoRA adapter named ${JSON.stringify(name)} is already loaded (unload it first)`,
          'lora_name',
        );
      this.adapters.set(name, {
        path: dir,
        adapters: await loadLoraAdapter(this.engine, dir, this.config, `lora:${name}`),
      });
    });
  }

  unloadLoraAdapter(name: string): Promise<void> {
    return this.scheduler.exclusive(async () => {
      const loaded = this.adapters.get(name);
      if (!loaded) throw new ApiError(400, `no LoRA adapter named ${JSON.stringify(name)} is loaded`, 'lora_name');
      if (this.decoders?.adapter === name) this.dropDecoders();
      if (this.scorer?.adapter === name) this.dropScorer();
      loaded.adapters.destroy();
      this.adapters.delete(name);
    });
  }

  /** The served weights with an adapter's (or none), decoded with the served KV cache dtype. */
  private policy(lora: LoraAdapters | null): PolicyWeights {
    return { config: this.config, params: this.params, lora, cacheDtype: this.dtypes.cache };
  }

  private dropDecoders(): void {
    this.decoders?.decoders.destroy();
    this.decoders = null;
  }

  private dropScorer(): void {
    this.scorer?.scorer.destroy();
    this.scorer = null;
  }

  /**
   * One continuous-batching loop with the base weights or an adapter; its decoders kept while the adapter is the same.
   */
  private async decodeLoop(queue: SampleQueue, adapter: string | null): Promise<void> {
    if (this.decoders?.adapter !== adapter) {
      this.dropDecoders();
      const lora = adapter === null ? null : this.adapters.get(adapter)?.adapters;
      if (lora === undefined)
        throw new ApiError(
          400,
          `the LoRA adapter ${JSON.stringify(adapter)} was unloaded before this request ran`,
          'lora_path',
        );
      this.decoders = { adapter, decoders: new RolloutDecoders(this.engine, this.policy(lora)) };
    }
    const { maxPromptTokens: P, maxNewTokens: R } = this.options;
    const loop = {
      P,
      R,
      ...this.end,
      eager: {
        lag: SERVER_READ_LAG,
        gather: SERVER_GATHER_STEPS,
        emptyRowSteps: SERVER_EMPTY_ROW_STEPS,
        between: turnEventLoop,
      },
      onDecodeStep: (rows: number) => this.counters.decoded(rows),
      onPrefill: (rows: number) => this.counters.prefilled(rows),
      topLogprobs: MAX_TOP_LOGPROBS,
      processing: true,
    };
    await decodeContinuous(this.decoders.decoders, queue, loop, this.slots, this.capacity);
  }

  destroy(): void {
    this.dropDecoders();
    this.dropScorer();
    for (const a of this.adapters.values()) a.adapters.destroy();
  }
}
