// The server's HTTP side (Node's http, no framework): routes, JSON bodies, and errors as OpenAI and SGLang send
// them. Every handler's failure becomes a response: an ApiError its status and body, a checkpoint, tokenizer or
// chat-template problem a 400, anything else a 500 whose message is also logged; the process keeps serving.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { HfConfigError } from '../../models/hf-config.ts';
import { CheckpointError } from '../../models/checkpoint-io-node.ts';
import { SafetensorsError } from '../../models/safetensors.ts';
import { TokenizerError } from '../../models/tokenizer.ts';
import { TORCH_NAME } from './serve-dtype.ts';
import { ApiError } from './api-error.ts';
import { alternativeTexts, completionText } from './completion-text.ts';
import {
  COMPLETIONS_DEFAULT_MAX_TOKENS,
  echoChunk,
  chatChunk,
  chatResponse,
  echoDelta,
  completionChunk,
  completionResponse,
  modelList,
  parseChatRequest,
  parseCompletionRequest,
  streamHead,
  usageChunk,
  type ReportedSample,
  type StreamDelta,
} from './openai.ts';
import {
  GENERATE_DEFAULT_MAX_NEW_TOKENS,
  generateOutput,
  generateResponse,
  newRid,
  parseAbortRequest,
  parseGenerateRequest,
  parseLoraRequest,
  parseUpdateWeightsRequest,
} from './sglang.ts';
import { truncatePrompts, type GenerationRequest } from './generation-request.ts';
import { reportPrompt, type ReportedPrompt } from './prompt-report.ts';
import type { SampleObserver, SampleResult } from './scheduler.ts';
import { SampleStream } from './streaming.ts';
import type { ModelHost, PrefillScores } from './model-host-node.ts';
import { ENGINE_SERVER_OWNER } from '../generation/remote/wire-format.ts';
import { RequestFields } from './request-fields.ts';

const tokenCount = (samples: readonly SampleResult[]) => samples.reduce((n, s) => n + s.tokens.length, 0);

/** Request bodies past this size are refused (a batch of long prompts as token ids stays well below). */
const MAX_BODY_BYTES = 64 * 2 ** 20;

/** Errors that mean "this input is not usable", answered 400 with their message. */
const INPUT_ERRORS = [CheckpointError, HfConfigError, SafetensorsError, TokenizerError];

/** JSON nested deeper than this is refused before it is parsed (recursive readers would overflow the stack). */
const MAX_JSON_DEPTH = 64;

interface Reply {
  status?: number;
  json?: unknown;
  text?: string;
}

/** What a handler gets besides the body: the response, for a stream, and the signal of the client going away. */
interface Exchange {
  res: ServerResponse;
  signal: AbortSignal;
}

/** A handler answers with a reply, or null when it has written the response itself (a stream). */
type Handler = (body: unknown, exchange: Exchange) => Promise<Reply | null>;

/** The deepest nesting of arrays and objects in a JSON text (strings skipped), in one pass. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++;
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) deepest = Math.max(deepest, ++depth);
    else if (c === 125 || c === 93) depth--;
  }
  return deepest;
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Events rather than `for await`: an async iterator per request costs the server's one thread more than the read.
  await new Promise<void>((resolve, reject) => {
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the limit the rest is read and dropped rather than the request destroyed: a client still writing its
      // body would get a reset (EPIPE) instead of the 413.
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.once('end', resolve);
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new Error('the client closed the connection before the request body ended'));
    });
  });
  if (size > MAX_BODY_BYTES) throw new ApiError(413, `the request body exceeds ${MAX_BODY_BYTES} bytes`);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  const depth = jsonDepth(text);
  if (depth > MAX_JSON_DEPTH)
    throw new ApiError(
      400,
      `the request body nests ${depth} levels deep, more than this server reads (${MAX_JSON_DEPTH})`,
    );
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, `the request body is not valid JSON (${(err as Error).message})`);
  }
}

/** Server-Sent Events, as OpenAI streams them: `data: <json>` per event, `data: [DONE]` at the end. */
function startEvents(res: ServerResponse): { event: (json: unknown) => void; end: () => void } {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  // A client that went away takes no more events: writing to its closed socket would only raise errors.
  const open = () => !res.destroyed && !res.writableEnded;
  return {
    event: (json) => void (open() && res.write(`data: ${JSON.stringify(json)}\n\n`)),
    end: () => void (open() && res.end('data: [DONE]\n\n')),
  };
}

function send(res: ServerResponse, status: number, payload: { json?: unknown; text?: string }): void {
  const body = payload.json !== undefined ? JSON.stringify(payload.json) : (payload.text ?? '');
  res.writeHead(status, {
    'content-type': payload.json !== undefined ? 'application/json' : 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** An error as a response: the ApiError it is, a 400 for unusable input, else a 500. */
function errorOf(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (INPUT_ERRORS.some((kind) => err instanceof kind) || (err as NodeJS.ErrnoException)?.code === 'ENOENT')
    return new ApiError(400, (err as Error).message);
  return new ApiError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
}

export class ServeHttp {
  private readonly routes: Record<string, Record<string, Handler>>;
  readonly server: Server;
  /** The /generate requests running, by rid: /abort_request ends them. */
  private readonly running = new Map<string, AbortController>();

  constructor(
    private readonly host: ModelHost,
    private readonly log: (line: string) => void,
    private readonly version: string,
  ) {
    const post = (handler: Handler) => ({ POST: handler });
    const get = (reply: () => Reply | Promise<Reply>) => async () => reply();
    const empty = get(() => ({ text: '' }));
    this.routes = {
      '/health': { GET: empty },
      // vLLM's liveness probe: GET or POST, an empty 200.
      '/ping': { GET: empty, POST: empty },
      '/version': { GET: get(() => ({ json: { version: this.version } })) },
      '/v1/models': { GET: get(() => ({ json: this.models() })) },
      '/get_model_info': {
        // owned_by (as /v1/models says it): tells a client this is this engine's server, which takes sample_offset.
        GET: get(() => ({
          json: {
            model_path: host.modelPath,
            tokenizer_path: host.options.modelDir,
            is_generation: true,
            // generation_config.json's sampling defaults, which requests that set none get.
            preferred_sampling_params: {
              temperature: host.sampling.defaults.temperature,
              top_p: host.sampling.defaults.topP,
              top_k: host.sampling.defaults.topK,
              repetition_penalty: host.sampling.defaults.repetitionPenalty,
              min_p: host.sampling.defaults.minP,
            },
            weight_version: host.weightVersion,
            dtype: TORCH_NAME[host.dtypes.weights],
            owned_by: ENGINE_SERVER_OWNER,
          },
        })),
      },
      '/get_server_info': { GET: get(() => ({ json: this.serverInfo() })) },
      // There is no prefix cache to flush: verl's SGLang rollout calls it after each weight update.
      '/flush_cache': { GET: get(() => ({ text: 'Cache flushed.' })), POST: get(() => ({ text: 'Cache flushed.' })) },
      '/metrics': { GET: get(() => ({ text: this.host.counters.prometheusText() })) },
      '/v1/completions': post((body, x) => this.completions(body, x)),
      '/v1/chat/completions': post((body, x) => this.chat(body, x)),
      '/generate': post((body, x) => this.generate(body, x)),
      '/abort_request': post(async (body) => this.abort(body)),
      '/tokenize': post((body) => this.tokenize(body)),
      '/v1/tokenize': post((body) => this.tokenize(body)),
      '/detokenize': post((body) => this.detokenize(body)),
      '/v1/detokenize': post((body) => this.detokenize(body)),
      '/update_weights_from_disk': post((body) => this.updateWeights(body)),
      '/load_lora_adapter': post((body) => this.loadLora(body, 'sglang')),
      '/unload_lora_adapter': post((body) => this.unloadLora(body, 'sglang')),
      '/v1/load_lora_adapter': post((body) => this.loadLora(body, 'vllm')),
      '/v1/unload_lora_adapter': post((body) => this.unloadLora(body, 'vllm')),
    };
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  /** The route of a path: a fixed one, or GET /v1/models/{id}. */
  private route(path: string): Record<string, Handler> | undefined {
    if (this.routes[path]) return this.routes[path];
    const prefix = '/v1/models/';
    if (!path.startsWith(prefix)) return undefined;
    const id = decodeURIComponent(path.slice(prefix.length));
    return {
      GET: async () => {
        const card = this.models().data.find((m) => m.id === id);
        if (!card) throw new ApiError(404, `The model \`${id}\` does not exist.`, 'model', 'NotFoundError');
        return { json: card };
      },
    };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    // A client that closes its connection before the answer aborts its request (its samples leave the batch).
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableEnded) gone.abort();
    });
    try {
      const route = this.route(path);
      if (!route) throw new ApiError(404, `no route ${req.method} ${path}`);
      const handler = route[req.method ?? ''];
      if (!handler) throw new ApiError(405, `${path} takes ${Object.keys(route).join(', ')}, not ${req.method}`);
      const body = req.method === 'POST' ? await readBody(req) : {};
      const reply = await handler(body, { res, signal: gone.signal });
      if (req.method === 'POST' && (reply?.status ?? 200) === 200) this.host.counters.answered(path);
      if (reply !== null) {
        const { status = 200, ...payload } = reply;
        send(res, status, payload);
      }
    } catch (err) {
      const error = errorOf(err);
      if (error.status >= 500) this.log(`${req.method} ${path}: ${error.message}`);
      if (!res.headersSent) send(res, error.status, { json: error.body() });
      else res.destroy();
    }
  }

  private get maxModelLen(): number {
    const { maxPromptTokens, maxNewTokens } = this.host.limits;
    return Math.min(maxPromptTokens + maxNewTokens, this.host.config.maxPositionEmbeddings);
  }

  private models() {
    const base = { name: this.host.options.servedModelName, root: this.host.modelPath, maxModelLen: this.maxModelLen };
    return modelList(base, this.host.loadedAdapters);
  }

  /** SGLang's /get_server_info: the server's arguments and state, under SGLang's names where it has them. */
  private serverInfo() {
    const o = this.host.options;
    return {
      model_path: this.host.modelPath,
      tokenizer_path: o.modelDir,
      served_model_name: o.servedModelName,
      context_length: this.maxModelLen,
      max_prompt_tokens: o.maxPromptTokens,
      max_new_tokens: o.maxNewTokens,
      max_running_requests: this.host.batch.slots,
      // SGLang's: the tokens the KV cache holds, every slot's positions.
      max_total_num_tokens: this.host.batch.slots * this.host.batch.capacity,
      dtype: TORCH_NAME[this.host.dtypes.weights],
      kv_cache_dtype: TORCH_NAME[this.host.dtypes.cache],
      max_request_samples: o.maxRequestSamples,
      gpu_memory_utilization: o.gpuMemoryUtilization,
      weight_version: this.host.weightVersion,
      version: this.version,
      lora_adapters: Object.fromEntries(this.host.loadedAdapters.map((a) => [a.name, a.path])),
    };
  }

  /** The request's `model`: the served model, or a loaded adapter's name; anything else is vLLM's 404. */
  private adapterOfModel(model: string | null): string | null {
    if (model === null || model === this.host.options.servedModelName) return null;
    if (this.host.hasAdapter(model)) return model;
    throw new ApiError(404, `The model \`${model}\` does not exist.`, 'model', 'NotFoundError');
  }

  private async report(
    request: GenerationRequest,
    samples: readonly SampleResult[],
    promptIds: number[][],
    prompts: readonly ReportedPrompt[] | null = null,
  ): Promise<ReportedSample[]> {
    this.host.counters.generated(samples.reduce((n, s) => n + s.tokens.length, 0));
    const tokenizer = this.host.tokenizer;
    return Promise.all(
      samples.map(async (s) => ({
        ...(await completionText(tokenizer, s, promptIds[s.prompt], request)),
        tokens: s.tokens,
        logprobs: s.logprobs,
        promptIds: promptIds[s.prompt],
        ...(prompts ? { prompt: prompts[s.prompt] } : {}),
        top: s.top && {
          ids: s.top.map((a) => a.ids),
          logprobs: s.top.map((a) => a.logprobs),
          texts: await alternativeTexts(tokenizer, promptIds[s.prompt], s.tokens, s.top, request.skipSpecialTokens),
        },
      })),
    );
  }

  /**
   * The prompts as a response reports them (OpenAI's echo, prompt log-probs), scored on the device when the
   * request asks for their log-probs; the scoring is queued when this is called. `given`: the prompts' texts as the
   * client sent them, where it did.
   */
  private async reportPrompts(
    request: GenerationRequest,
    promptIds: readonly number[][],
    given: readonly (string | null)[] | null,
    gather: readonly number[][] | null = null,
    inPrefill: PrefillScores | null = null,
  ): Promise<ReportedPrompt[]> {
    const K = request.promptLogprobs;
    const options = (i: number) => ({ gather: gather?.[i] });
    const scored =
      K === null ? null : await (inPrefill?.scores ?? this.host.scorePrompts(promptIds, K, request.adapter, options));
    const skip = request.skipSpecialTokens;
    return Promise.all(
      promptIds.map((ids, i) =>
        reportPrompt(this.host.tokenizer, ids, given?.[i] ?? null, scored?.[i] ?? null, skip, gather?.[i] ?? null),
      ),
    );
  }

  /**
   * SGLang's output_token_ids_logprobs: the log-probs of each prompt's `gather` tokens at each generated token, as
   * the sampler saw them (log_softmax(logits / temperature), 1 when greedy), from one scoring pass over the prompt
   * and its response.
   */
  private async responseTokenIdLogprobs(
    request: GenerationRequest,
    samples: readonly SampleResult[],
    promptIds: readonly number[][],
    gather: readonly number[][],
  ): Promise<({ ids: readonly number[]; logprobs: Float32Array } | null)[]> {
    const temperature = request.temperature > 0 ? request.temperature : 1;
    const scored = await this.host.scorePrompts(
      samples.map((s) => [...promptIds[s.prompt], ...s.tokens]),
      0,
      request.adapter,
      (i) => ({ gather: gather[samples[i].prompt], temperature }),
    );
    return samples.map((s, i) => {
      const ids = gather[s.prompt];
      // Entry q of the scores is token q + 1's position: the first generated token's is the prompt's length − 1.
      const from = (promptIds[s.prompt].length - 1) * ids.length;
      return { ids, logprobs: scored[i].gathered.slice(from, from + s.tokens.length * ids.length) };
    });
  }

  /** Prompt scores out of the request's own prefills where it both scores its prompts and generates (null: none, or
   *  scoring alone, a budget of 0: the separate pass). */
  private prefillScores(
    request: GenerationRequest,
    promptIds: readonly number[][],
    budget: number,
    gather: readonly number[][] | null = null,
  ): PrefillScores | null {
    if (request.promptLogprobs === null || budget === 0) return null;
    return this.host.prefillScores(request, promptIds, (i) => ({ gather: gather?.[i] }));
  }

  /** A request's prompt ids: tokenized (texts) or as given, truncated as vLLM's truncate_prompt_tokens asks. */
  private async promptIds(request: GenerationRequest, param: string): Promise<number[][]> {
    const ids = await this.host.tokenize(request.prompts, param);
    return truncatePrompts(ids, request.truncatePromptTokens, this.host.limits);
  }

  /** The prompts' texts as the client sent them (null for token ids, or when truncation cut them). */
  private givenTexts(request: GenerationRequest): (string | null)[] | null {
    if (request.truncatePromptTokens !== null) return null;
    return request.prompts.map((p) => ('text' in p ? p.text : null));
  }

  /**
   * Streams a request's samples as Server-Sent Events: `opening` first, then per read of the batch one event per
   * sample with new tokens (`event`, which may skip it by answering null), then `closing` and `data: [DONE]`. The
   * request's checks run before the stream starts, so a refused request still gets its 400.
   */
  private async stream(
    res: ServerResponse,
    request: GenerationRequest,
    promptIds: number[][],
    start: (observer: SampleObserver) => Promise<SampleResult[]>,
    events: {
      /** Sent before any sample's event: may wait for the prompts' scores. */
      opening: unknown[] | Promise<unknown[]>;
      event: (d: StreamDelta, stream: SampleStream) => unknown | null;
      closing: (samples: readonly SampleResult[]) => unknown[];
    },
  ): Promise<null> {
    const streams = Array.from(
      { length: promptIds.length * request.n },
      (_, j) => new SampleStream(this.host.tokenizer, promptIds[Math.floor(j / request.n)], request, j),
    );
    // Decoding text is asynchronous: the samples' events are written in the order the loop reported them, after the
    // opening events.
    let order = Promise.resolve(events.opening).then((opening) => {
      for (const e of opening) sse.event(e);
    });
    const write = (delta: (s: SampleStream) => Promise<StreamDelta>, j: number) => {
      order = order.then(async () => {
        const e = events.event(await delta(streams[j]), streams[j]);
        if (e !== null) sse.event(e);
      });
    };
    const done = start({
      tokens: (j, tokens, logprobs, top) => write((s) => s.add(tokens, logprobs, top), j),
      finished: (j, result) => write((s) => s.finish(result), j),
    });
    const sse = startEvents(res);
    try {
      const samples = await done;
      await order;
      this.host.counters.generated(samples.reduce((n, s) => n + s.tokens.length, 0));
      for (const e of events.closing(samples)) sse.event(e);
    } catch (err) {
      const error = errorOf(err);
      if (error.status >= 500) this.log(`stream: ${error.message}`);
      sse.event(error.body());
    }
    sse.end();
    return null;
  }

  private async completions(body: unknown, x: Exchange) {
    const c = parseCompletionRequest(body, this.host.sampling.defaults);
    c.request.adapter = this.adapterOfModel(c.model);
    const promptIds = await this.promptIds(c.request, 'prompt');
    const reportsPrompt = c.echo || c.request.promptLogprobs !== null;
    const budget = this.host.check(c.request, promptIds, COMPLETIONS_DEFAULT_MAX_TOKENS, 'prompt', reportsPrompt);
    const scores = this.prefillScores(c.request, promptIds, budget);
    const given = this.givenTexts(c.request);
    const prompts = reportsPrompt ? this.reportPrompts(c.request, promptIds, given, null, scores) : null;
    const run = (observer?: SampleObserver) =>
      this.host.generate(c.request, promptIds, budget, { signal: x.signal, observer, scores: scores ?? undefined });
    const model = c.model ?? this.host.options.servedModelName;
    const promptTokens = promptIds.reduce((n, p) => n + p.length, 0);
    const n = c.request.n;
    if (c.stream) {
      const head = streamHead(model, 'cmpl');
      // An echoing choice's text starts with its prompt: the generated tokens' offsets come after it.
      let echoed: ReportedPrompt[] | null = null;
      const shift = (d: StreamDelta) => (echoed ? echoed[Math.floor(d.index / n)].text.length : 0);
      const opening = (ps: ReportedPrompt[]) => {
        echoed = ps;
        return Array.from({ length: ps.length * n }, (_, j) => echoChunk(head, j, ps[Math.floor(j / n)], c));
      };
      return this.stream(x.res, c.request, promptIds, run, {
        opening: c.echo && prompts ? prompts.then(opening) : [],
        event: (d) =>
          d.text === '' && d.end === null && !c.logprobs
            ? null
            : completionChunk(head, { ...d, textOffset: d.textOffset + shift(d) }, c),
        closing: (samples) =>
          c.includeUsage ? [usageChunk(head, 'text_completion', promptTokens, tokenCount(samples))] : [],
      });
    }
    const [samples, reportedPrompts] = await Promise.all([run(), prompts]);
    const reported = await this.report(c.request, samples, promptIds, reportedPrompts);
    return { json: completionResponse(model, reported, promptTokens, c) };
  }

  private async chat(body: unknown, x: Exchange) {
    const c = parseChatRequest(body, this.host.sampling.defaults);
    c.request.adapter = this.adapterOfModel(c.model);
    const chatIds = [await this.host.chatPrompt(c.messages, c.addGenerationPrompt, c.templateKwargs)];
    const promptIds = truncatePrompts(chatIds, c.request.truncatePromptTokens, this.host.limits);
    const budget = this.host.check(c.request, promptIds, this.host.limits.maxNewTokens, 'messages');
    const scores = this.prefillScores(c.request, promptIds, budget);
    const prompts =
      c.request.promptLogprobs !== null ? this.reportPrompts(c.request, promptIds, null, null, scores) : null;
    const run = (observer?: SampleObserver) =>
      this.host.generate(c.request, promptIds, budget, { signal: x.signal, observer, scores: scores ?? undefined });
    const model = c.model ?? this.host.options.servedModelName;
    if (c.stream) {
      const head = streamHead(model, 'chatcmpl');
      return this.stream(x.res, c.request, promptIds, run, {
        // vLLM streams an echoed message as each choice's first content, without log-probs.
        opening: Array.from({ length: c.request.n }, (_, index) => [
          chatChunk(head, { index, role: 'assistant' }, c),
          ...(c.echo === '' ? [] : [chatChunk(head, echoDelta(index, c.echo), { ...c, logprobs: false })]),
        ]).flat(),
        event: (d) => (d.text === '' && d.end === null && !c.logprobs ? null : chatChunk(head, d, c)),
        closing: (samples) =>
          c.includeUsage ? [usageChunk(head, 'chat.completion.chunk', promptIds[0].length, tokenCount(samples))] : [],
      });
    }
    const [samples, reportedPrompts] = await Promise.all([run(), prompts]);
    const reported = await this.report(c.request, samples, promptIds, reportedPrompts);
    return { json: chatResponse(model, reported, promptIds[0].length, c) };
  }

  private async generate(body: unknown, x: Exchange) {
    const started = performance.now();
    const g = parseGenerateRequest(body, this.host.sampling.defaults);
    const rid = g.rid ?? newRid();
    const param = g.request.prompts.length > 0 && 'ids' in g.request.prompts[0] ? 'input_ids' : 'text';
    const promptIds = await this.promptIds(g.request, param);
    const budget = this.host.check(g.request, promptIds, GENERATE_DEFAULT_MAX_NEW_TOKENS, param);
    const shortest = Math.min(...promptIds.map((ids) => ids.length));
    if (g.returnLogprob && g.logprobStartLen >= shortest)
      throw new ApiError(
        400,
        `logprob_start_len: ${g.logprobStartLen} is not below the prompt's length ${shortest}`,
        'logprob_start_len',
      );
    const outOfVocabulary = g.tokenIdsLogprob?.flat().find((id) => id >= this.host.limits.vocabSize);
    if (outOfVocabulary !== undefined)
      throw new ApiError(
        400,
        `token_ids_logprob: ${outOfVocabulary} is outside the vocabulary [0, ${this.host.limits.vocabSize})`,
        'token_ids_logprob',
      );
    const gather = g.returnLogprob ? g.tokenIdsLogprob : null;
    const scores = this.prefillScores(g.request, promptIds, budget, gather);
    const scoring =
      g.request.promptLogprobs !== null ? this.reportPrompts(g.request, promptIds, null, gather, scores) : null;
    const abort = new AbortController();
    x.signal.addEventListener('abort', () => abort.abort(), { once: true });
    const run = (observer?: SampleObserver) =>
      this.host.generate(g.request, promptIds, budget, { signal: abort.signal, observer, scores: scores ?? undefined });
    this.running.set(rid, abort);
    try {
      const count = g.request.prompts.length * g.request.n;
      const seconds = () => (performance.now() - started) / 1000;
      if (g.stream) {
        // SGLang streams each sample's text and output_ids so far (cumulative), with its index in a batch.
        let scored: ReportedPrompt[] | null = null;
        return await this.stream(x.res, g.request, promptIds, run, {
          opening: scoring
            ? scoring.then((ps) => {
                scored = ps;
                return [];
              })
            : [],
          event: (d, s) => {
            const p = Math.floor(d.index / g.request.n);
            const sample = {
              text: s.text,
              tokens: s.tokens,
              logprobs: s.logprobs,
              promptTokens: promptIds[p].length,
              promptIds: promptIds[p],
              promptScores: scored?.[p].scores,
              end: d.end,
              top: s.top,
            };
            const output = generateOutput(sample, d.index, count, { ...g, rid }, seconds(), this.host.weightVersion);
            return g.batch || count > 1 ? { ...output, index: d.index } : output;
          },
          closing: () => [],
        });
      }
      const [samples, prompts] = await Promise.all([run(), scoring]);
      const idLogprobs = gather ? await this.responseTokenIdLogprobs(g.request, samples, promptIds, gather) : null;
      const reported = await this.report(g.request, samples, promptIds, prompts);
      const generated = reported.map((s, i) => ({
        ...s,
        promptTokens: s.promptIds.length,
        promptScores: s.prompt?.scores,
        tokenIdLogprobs: idLogprobs?.[i],
        end: s,
      }));
      return { json: generateResponse(generated, { ...g, rid }, seconds(), this.host.weightVersion) };
    } finally {
      this.running.delete(rid);
    }
  }

  /** SGLang's /abort_request: ends the /generate request with this rid (or every one); its samples end 'abort'. */
  private abort(body: unknown): Reply {
    const { rid, all } = parseAbortRequest(body);
    for (const [id, controller] of this.running) if (all || id === rid) controller.abort();
    return { text: '' };
  }

  /** vLLM's and SGLang's /tokenize: a prompt's ids (special tokens added unless add_special_tokens is false). */
  private async tokenize(body: unknown): Promise<Reply> {
    const f = RequestFields.of(body);
    const prompt = f.has('prompt') ? f.string('prompt', '') : f.string('text', '');
    const addSpecialTokens = f.boolean('add_special_tokens', true);
    this.host.checkPromptText(prompt, 'prompt');
    const tokens = await this.host.tokenizer.encode(prompt, { addSpecialTokens });
    return { json: { tokens, count: tokens.length, max_model_len: this.maxModelLen, token_strs: null } };
  }

  /** vLLM's /detokenize answers {prompt}, SGLang's {text}: both are given. */
  private async detokenize(body: unknown): Promise<Reply> {
    const f = RequestFields.of(body);
    const tokens = f.integers('tokens');
    const bad = tokens.find((id) => id < 0 || id >= this.host.limits.vocabSize);
    if (bad !== undefined)
      throw new ApiError(400, `tokens: ${bad} is outside the vocabulary [0, ${this.host.limits.vocabSize})`, 'tokens');
    const text = await this.host.tokenizer.decode(tokens, {
      skipSpecialTokens: f.boolean('skip_special_tokens', false),
    });
    return { json: { prompt: text, text } };
  }

  /** SGLang's answer: {success, message, num_paused_requests}, 200 or 400; the old weights serve on after a refusal. */
  private async updateWeights(body: unknown) {
    const { modelPath, weightVersion } = parseUpdateWeightsRequest(body);
    try {
      await this.host.updateWeightsFromDisk(modelPath);
    } catch (err) {
      const error = errorOf(err);
      if (error.status >= 500) throw error;
      return {
        status: 400,
        json: {
          success: false,
          message: `Failed to update weights: ${error.message}. The previous weights are still served.`,
          num_paused_requests: 0,
        },
      };
    }
    if (weightVersion !== null) this.host.weightVersion = weightVersion;
    return { json: { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 } };
  }

  /** SGLang answers {success, error_message, loaded_adapters}; vLLM a line of text, or its error body. */
  private async loadLora(body: unknown, protocol: 'sglang' | 'vllm') {
    const { name, path } = parseLoraRequest(body, true);
    return this.loraChange(
      protocol,
      () => this.host.loadLoraAdapter(name, path),
      `Success: LoRA adapter '${name}' added successfully.`,
    );
  }

  private async unloadLora(body: unknown, protocol: 'sglang' | 'vllm') {
    const { name } = parseLoraRequest(body, false);
    return this.loraChange(
      protocol,
      () => this.host.unloadLoraAdapter(name),
      `Success: LoRA adapter '${name}' removed successfully.`,
    );
  }

  private async loraChange(protocol: 'sglang' | 'vllm', change: () => Promise<void>, vllmSuccess: string) {
    const loaded = () => Object.fromEntries(this.host.loadedAdapters.map((a) => [a.name, a.path]));
    try {
      await change();
    } catch (err) {
      const error = errorOf(err);
      if (protocol === 'vllm' || error.status >= 500) throw error;
      return { status: 400, json: { success: false, error_message: error.message, loaded_adapters: loaded() } };
    }
    return protocol === 'vllm'
      ? { text: vllmSuccess }
      : { json: { success: true, error_message: null, loaded_adapters: loaded() } };
  }

  listen(port: number, hostname: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, hostname, () => {
        this.server.off('error', reject);
        const address = this.server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
