// The OpenAI-compatible routes' request and response shapes, as vLLM's OpenAI server implements them
// (vllm/entrypoints/openai/protocol.py: CompletionRequest, ChatCompletionRequest, CompletionResponse,
// ChatCompletionResponse, ModelList, ErrorResponse): /v1/completions, /v1/chat/completions, /v1/models.
// vLLM's extensions read here: top_k, stop_token_ids, include_stop_str_in_output, skip_special_tokens,
// return_token_ids, add_generation_prompt, chat_template_kwargs; and this server's own, sample_offset (the
// random stream of the request's first sample: see docs/serving.md).
import type { ChatMessage } from '../../models/chat-template.ts';
import { ApiError, badRequest } from './api-error.ts';
import { RequestFields, isObject } from './request-fields.ts';
import {
  promptInputs,
  refuseUnsupportedSampling,
  samplingFields,
  seedOf,
  processingFields,
  NEUTRAL_SAMPLING,
  type GenerationRequest,
  type SamplingDefaults,
} from './generation-request.ts';
import type { CompletionText } from './completion-text.ts';
import { vllmPromptLogprobs, type ReportedPrompt } from './prompt-report.ts';
import { ENGINE_SERVER_OWNER } from '../generation/remote/wire-format.ts';
import { MAX_TOP_LOGPROBS } from '../../kernels/decode/top-logprobs.ts';

/** vLLM's default budget of /v1/completions (OpenAI's max_tokens default). */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

interface OpenAiRequest {
  request: GenerationRequest;
  /** The `model` field, or null when absent. */
  model: string | null;
  returnTokenIds: boolean;
  /** Server-Sent Events, one chunk per read of the decode batch, then `data: [DONE]`. */
  stream: boolean;
  /** stream_options.include_usage: `usage: null` on every chunk, then a last chunk with no choices and the usage. */
  includeUsage: boolean;
  /** vLLM's prompt_logprobs: alternatives per prompt position in the response's prompt_logprobs (null: absent). */
  promptLogprobs: number | null;
}

/** The fields /v1/completions and /v1/chat/completions share. */
function commonFields(
  f: RequestFields,
  maxTokens: number | null,
  defaults: SamplingDefaults,
): Omit<GenerationRequest, 'prompts'> & Omit<OpenAiRequest, 'request'> {
  refuseUnsupportedSampling(f);
  const stream = f.boolean('stream', false);
  const streamOptions = f.object('stream_options');
  if (!stream && f.has('stream_options')) throw badRequest('stream_options', 'nothing unless stream is true', '{...}');
  const s = samplingFields(f, defaults);
  f.unsupported('best_of', s.n, 'best_of other than n is not supported by this server');
  f.unsupported('use_beam_search', false, 'beam search is not supported by this server');
  // vLLM's: -1 is the whole vocabulary; the count is checked against --max-logprobs with the served model.
  const promptLogprobs = f.has('prompt_logprobs') ? f.number('prompt_logprobs', 0, { integer: true, min: -1 }) : null;
  // vLLM refuses them too: a stream has no place for them (echo's prompt log-probs do stream).
  if (stream && promptLogprobs !== null)
    throw new ApiError(400, 'prompt_logprobs: not available when stream is true (as vLLM)', 'prompt_logprobs');
  const seed = f.optionalInteger('seed');
  return {
    n: s.n,
    maxTokens,
    temperature: s.temperature,
    topP: s.topP,
    topK: s.topK,
    seed: { seed: seedOf(seed), sampleOffset: s.sampleOffset },
    stop: f.strings('stop'),
    stopTokenIds: s.stopTokenIds,
    keepStopString: f.boolean('include_stop_str_in_output', false),
    skipSpecialTokens: f.boolean('skip_special_tokens', true),
    adapter: null,
    topLogprobs: 0,
    processing: processingFields(f, 'min_tokens', defaults),
    promptLogprobs,
    truncatePromptTokens: f.has('truncate_prompt_tokens')
      ? f.number('truncate_prompt_tokens', 0, { integer: true, min: -1 })
      : null,
    model: f.has('model') ? f.string('model', '') : null,
    returnTokenIds: f.boolean('return_token_ids', false),
    stream,
    includeUsage: streamOptions.boolean('include_usage', false),
  };
}

export interface CompletionRequest extends OpenAiRequest {
  /** Per-token log-probs (`logprobs` given; its N alternatives are the request's topLogprobs). */
  logprobs: boolean;
  /** The prompt comes first in each choice's text (and, with logprobs, its tokens in the log-probs), as vLLM's. */
  echo: boolean;
}

export function parseCompletionRequest(
  body: unknown,
  defaults: SamplingDefaults = NEUTRAL_SAMPLING,
): CompletionRequest {
  const f = RequestFields.of(body);
  if (!f.has('prompt')) throw badRequest('prompt', 'a prompt (text or token ids)', undefined);
  const prompts = promptInputs(f.raw('prompt'), 'prompt');
  const echo = f.boolean('echo', false);
  f.unsupported('suffix', '', 'suffix is not supported by this server');
  // vLLM's max_logprobs (20) bounds the alternatives per token.
  const logprobs = f.has('logprobs') ? f.number('logprobs', 0, { integer: true, min: 0, max: MAX_TOP_LOGPROBS }) : null;
  const { model, returnTokenIds, stream, includeUsage, ...rest } = commonFields(
    f,
    f.has('max_tokens') ? f.number('max_tokens', 0, { integer: true }) : null,
    defaults,
  );
  // vLLM: echo with logprobs scores the prompt with as many alternatives; prompt_logprobs may ask for more.
  const echoed = echo && logprobs !== null ? logprobs : null;
  const scored = [rest.promptLogprobs, echoed].filter((k) => k !== null);
  return {
    request: {
      prompts,
      ...rest,
      topLogprobs: logprobs ?? 0,
      promptLogprobs: scored.length === 0 ? null : scored.includes(-1) ? -1 : Math.max(...scored),
    },
    model,
    returnTokenIds,
    stream,
    includeUsage,
    promptLogprobs: rest.promptLogprobs,
    logprobs: logprobs !== null,
    echo,
  };
}

export interface ChatRequest extends OpenAiRequest {
  messages: ChatMessage[];
  addGenerationPrompt: boolean;
  templateKwargs: Record<string, unknown>;
  logprobs: boolean;
  /** The text each choice's content starts with: vLLM's `echo`, the last message's when it has the reply's role. */
  echo: string;
}

/** A message's content: a string, or a list of text parts (OpenAI's content parts), joined. */
function messageContent(value: unknown, param: string): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((p) => isObject(p) && p.type === 'text' && typeof p.text === 'string')) {
    return value.map((p) => (p as { text: string }).text).join('');
  }
  throw badRequest(
    param,
    'a string or a list of {"type": "text", "text": ...} parts (this server reads text only)',
    value,
  );
}

export function parseChatRequest(body: unknown, defaults: SamplingDefaults = NEUTRAL_SAMPLING): ChatRequest {
  const f = RequestFields.of(body);
  const raw = f.raw('messages');
  if (!Array.isArray(raw) || raw.length === 0) throw badRequest('messages', 'a non-empty list of messages', raw);
  const messages = raw.map((m, i): ChatMessage => {
    if (!isObject(m) || typeof m.role !== 'string')
      throw badRequest(`messages[${i}]`, 'an object with a string role', m);
    return {
      ...m,
      role: m.role,
      content: m.content === undefined || m.content === null ? '' : messageContent(m.content, `messages[${i}].content`),
    };
  });
  // SDKs send an empty tool list and tool_choice "none" or "auto" with it: both mean plain text.
  const tools = f.raw('tools');
  if (tools !== undefined && tools !== null && !(Array.isArray(tools) && tools.length === 0))
    throw new ApiError(400, 'tools: tool calling is not supported by this server (only [])', 'tools');
  const toolChoice = f.raw('tool_choice');
  if (toolChoice !== undefined && toolChoice !== null && toolChoice !== 'none' && toolChoice !== 'auto')
    throw badRequest('tool_choice', '"none" or "auto" (there are no tools)', toolChoice);
  // vLLM's: -1 is the whole vocabulary, refused against --max-logprobs (ModelHost.check).
  const topLogprobs = f.number('top_logprobs', 0, { integer: true, min: -1, max: MAX_TOP_LOGPROBS });
  const logprobs = f.boolean('logprobs', false);
  if (topLogprobs !== 0 && !logprobs)
    throw new ApiError(400, 'top_logprobs: needs logprobs to be true (as OpenAI requires)', 'top_logprobs');
  const kwargs = f.raw('chat_template_kwargs');
  if (kwargs !== undefined && kwargs !== null && !isObject(kwargs))
    throw badRequest('chat_template_kwargs', 'an object', kwargs);
  const budget = f.has('max_completion_tokens')
    ? f.number('max_completion_tokens', 0, { integer: true })
    : f.has('max_tokens')
      ? f.number('max_tokens', 0, { integer: true })
      : null;
  const { model, returnTokenIds, stream, includeUsage, ...rest } = commonFields(f, budget, defaults);
  const addGenerationPrompt = f.boolean('add_generation_prompt', true);
  // vLLM's reply role: the assistant's, or without a generation prompt the last message's (which it continues).
  const last = messages[messages.length - 1];
  const replyRole = addGenerationPrompt ? 'assistant' : last.role;
  return {
    request: { prompts: [], ...rest, topLogprobs },
    model,
    returnTokenIds,
    stream,
    includeUsage,
    promptLogprobs: rest.promptLogprobs,
    messages,
    addGenerationPrompt,
    templateKwargs: (kwargs as Record<string, unknown> | undefined) ?? {},
    logprobs,
    echo: f.boolean('echo', false) && last.role === replyRole ? last.content : '',
  };
}

/** One generated sample, ready to report. */
export interface ReportedSample extends CompletionText {
  tokens: number[];
  logprobs: Float32Array;
  promptIds: number[];
  /** Per token, its alternatives and their texts, when asked for. */
  top: Alternatives | null;
  /** Its prompt, when the request echoes or scores it. */
  prompt?: ReportedPrompt;
}

/** Per generated token, its most likely alternatives, their log-probs and texts (most likely first). */
export interface Alternatives {
  ids: number[][];
  logprobs: number[][];
  texts: string[][];
}

type TopDict = Record<string, number>;

/** vLLM's completions top_logprobs: per token {text: log-prob} of its alternatives, and of the token drawn. */
function topLogprobDicts(top: Alternatives, tokenTexts: readonly string[], logprobs: ArrayLike<number>): TopDict[] {
  return top.texts.map((texts, t) => {
    const dict: TopDict = {};
    texts.forEach((text, k) => {
      dict[text] ??= top.logprobs[t][k];
    });
    dict[tokenTexts[t]] ??= logprobs[t];
    return dict;
  });
}

/**
 * An echoed prompt's part of a completions choice's logprobs (vLLM's): each token's text and log-prob (null for the
 * first), and with N > 0 its N alternatives (null for the first).
 */
function promptLogprobParts(prompt: ReportedPrompt, N: number) {
  const s = prompt.scores!;
  const rest = prompt.tokenTexts.slice(1);
  const top =
    N > 0
      ? [
          null,
          ...topLogprobDicts(
            {
              ids: s.top.ids,
              logprobs: s.top.logprobs.map((l) => l.slice(0, N)),
              texts: s.top.texts.map((t) => t.slice(0, N)),
            },
            rest,
            s.logprobs,
          ),
        ]
      : null;
  return { tokenTexts: prompt.tokenTexts, logprobs: [null, ...Array.from(s.logprobs)], top };
}

/** OpenAI's chat top_logprobs: per token [{token, logprob, bytes}] of its alternatives. */
function topLogprobLists(top: Alternatives, t: number) {
  return top.texts[t].map((token, k) => ({ token, logprob: top.logprobs[t][k], bytes: utf8Bytes(token) }));
}

/**
 * A completions choice's logprobs (vLLM's): the tokens' texts and log-probs, where each text starts in the choice's
 * text (its first at `start`), and their alternatives; an echoed prompt's tokens come first. A response's choice and
 * a stream chunk's both take it.
 */
function completionLogprobs(
  tokenTexts: readonly string[],
  logprobs: ArrayLike<number>,
  top: Alternatives | null,
  start: number,
  echoed: ReturnType<typeof promptLogprobParts> | null = null,
) {
  let offset = start;
  const texts = [...(echoed?.tokenTexts ?? []), ...tokenTexts];
  const sampleTop = top ? topLogprobDicts(top, tokenTexts, logprobs) : null;
  return {
    text_offset: texts.map((t) => (offset += t.length) - t.length),
    token_logprobs: [...(echoed?.logprobs ?? []), ...Array.from(logprobs)],
    tokens: texts,
    top_logprobs: sampleTop && [...(echoed?.top ?? []), ...sampleTop],
  };
}

/** A chat choice's logprobs (OpenAI's content list), for a response's choice and a stream chunk's alike. */
function chatLogprobs(tokenTexts: readonly string[], logprobs: ArrayLike<number>, top: Alternatives | null) {
  return {
    content: tokenTexts.map((token, t) => ({
      token,
      logprob: logprobs[t],
      bytes: utf8Bytes(token),
      top_logprobs: top ? topLogprobLists(top, t) : [],
    })),
  };
}

const utf8Bytes = (text: string) => Array.from(new TextEncoder().encode(text));

function usage(promptTokens: number, samples: readonly ReportedSample[]) {
  const completion = samples.reduce((n, s) => n + s.tokens.length, 0);
  return { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
}

/** vLLM's stop_reason: the stop string or stop token id that ended the sample; null at EOS or the budget. */
function stopReason(s: CompletionText): string | number | null {
  return s.eos ? null : s.matched;
}

function randomId(prefix: string): string {
  return `${prefix}-${Array.from({ length: 16 }, () => Math.floor(Math.random() * 16).toString(16)).join('')}`;
}

const now = () => Math.floor(Date.now() / 1000);

/** Prompt tokens counted once per prompt (not per sample), as vLLM does. */
export function completionResponse(
  model: string,
  samples: readonly ReportedSample[],
  promptTokens: number,
  c: Pick<CompletionRequest, 'logprobs' | 'returnTokenIds'> & Partial<EchoFields>,
) {
  return {
    id: randomId('cmpl'),
    object: 'text_completion',
    created: now(),
    model,
    choices: samples.map((s, index) => ({
      index,
      text: c.echo ? s.prompt!.text + s.text : s.text,
      logprobs: c.logprobs
        ? completionLogprobs(s.tokenTexts, s.logprobs, s.top, 0, c.echo ? echoedPrompt(s.prompt!, c) : null)
        : null,
      finish_reason: s.finishReason,
      stop_reason: stopReason(s),
      ...(s.prompt?.scores
        ? { prompt_logprobs: vllmPromptLogprobs(s.prompt, c.promptLogprobs ?? c.request?.topLogprobs ?? 0) }
        : {}),
      ...(c.returnTokenIds ? { prompt_token_ids: s.promptIds, token_ids: s.tokens } : {}),
    })),
    usage: usage(promptTokens, samples),
  };
}

type EchoFields = Pick<CompletionRequest, 'echo' | 'promptLogprobs' | 'request'>;

/** An echoed prompt's log-prob part, with as many alternatives as the generated tokens get (logprobs: N). */
function echoedPrompt(prompt: ReportedPrompt, c: Partial<Pick<CompletionRequest, 'request'>>) {
  return promptLogprobParts(prompt, c.request?.topLogprobs ?? 0);
}

export function chatResponse(
  model: string,
  samples: readonly ReportedSample[],
  promptTokens: number,
  c: Pick<ChatRequest, 'logprobs' | 'returnTokenIds' | 'promptLogprobs' | 'echo'>,
) {
  const prompt = samples[0]?.prompt;
  return {
    id: randomId('chatcmpl'),
    object: 'chat.completion',
    created: now(),
    model,
    choices: samples.map((s, index) => ({
      index,
      message: { role: 'assistant', content: c.echo + s.text },
      logprobs: c.logprobs ? chatLogprobs(s.tokenTexts, s.logprobs, s.top) : null,
      finish_reason: s.finishReason,
      stop_reason: stopReason(s),
      ...(c.returnTokenIds ? { token_ids: s.tokens } : {}),
    })),
    usage: usage(promptTokens, samples),
    // vLLM's: the chat prompt's log-probs once, beside the choices.
    ...(c.promptLogprobs !== null && prompt ? { prompt_logprobs: vllmPromptLogprobs(prompt, c.promptLogprobs) } : {}),
    ...(c.returnTokenIds ? { prompt_token_ids: samples[0]?.promptIds ?? [] } : {}),
  };
}

/** The part of a sample one stream chunk carries: its new text and tokens, and the end once it ended. */
export interface StreamDelta {
  /** Choice index (prompt-major sample index). */
  index: number;
  text: string;
  tokens: readonly number[];
  logprobs: readonly number[];
  tokenTexts: readonly string[];
  /** Offset of the first token's text in the sample's text (text_offset). */
  textOffset: number;
  /** The tokens' alternatives, when asked for. */
  top: Alternatives | null;
  /** Set on the sample's last chunk. */
  end: CompletionText | null;
}

/** Stream chunks of one response share its id, creation time and model. */
export interface StreamHead {
  id: string;
  created: number;
  model: string;
}

export function streamHead(model: string, kind: 'cmpl' | 'chatcmpl'): StreamHead {
  return { id: randomId(kind), created: now(), model };
}

/** A text_completion chunk (vLLM's CompletionStreamResponse). */
export function completionChunk(
  head: StreamHead,
  d: StreamDelta,
  c: Pick<CompletionRequest, 'logprobs' | 'includeUsage' | 'returnTokenIds'>,
) {
  return {
    ...head,
    object: 'text_completion',
    choices: [
      {
        index: d.index,
        text: d.text,
        logprobs: c.logprobs ? completionLogprobs(d.tokenTexts, d.logprobs, d.top, d.textOffset) : null,
        finish_reason: d.end?.finishReason ?? null,
        stop_reason: d.end ? stopReason(d.end) : null,
        ...(c.returnTokenIds ? { token_ids: [...d.tokens] } : {}),
      },
    ],
    ...(c.includeUsage ? { usage: null } : {}),
  };
}

/**
 * An echoing stream's first chunk of a choice: the prompt's text and, with logprobs, its tokens' log-probs (vLLM
 * sends them with the first generated text; here they go first, before any token is read).
 */
export function echoChunk(
  head: StreamHead,
  index: number,
  prompt: ReportedPrompt,
  c: Pick<CompletionRequest, 'logprobs' | 'includeUsage' | 'request'>,
) {
  return {
    ...head,
    object: 'text_completion',
    choices: [
      {
        index,
        text: prompt.text,
        logprobs: c.logprobs
          ? completionLogprobs([], [], c.request.topLogprobs > 0 ? EMPTY_TOP : null, 0, echoedPrompt(prompt, c))
          : null,
        finish_reason: null,
        stop_reason: null,
      },
    ],
    ...(c.includeUsage ? { usage: null } : {}),
  };
}

const EMPTY_TOP: Alternatives = { ids: [], logprobs: [], texts: [] };

/** A choice's echoed message (ChatRequest.echo) as a stream delta: text, no tokens. */
export function echoDelta(index: number, text: string): StreamDelta {
  return { index, text, tokens: [], logprobs: [], tokenTexts: [], textOffset: 0, top: null, end: null };
}

/** A chat.completion.chunk (vLLM's ChatCompletionStreamResponse); `role` starts a choice's stream. */
export function chatChunk(
  head: StreamHead,
  d: StreamDelta | { index: number; role: 'assistant' },
  c: Pick<ChatRequest, 'logprobs' | 'includeUsage' | 'returnTokenIds'>,
) {
  const choice =
    'role' in d
      ? { index: d.index, delta: { role: d.role, content: '' }, logprobs: null, finish_reason: null }
      : {
          index: d.index,
          delta: d.text === '' && d.end ? {} : { content: d.text },
          logprobs: c.logprobs ? chatLogprobs(d.tokenTexts, d.logprobs, d.top) : null,
          finish_reason: d.end?.finishReason ?? null,
          stop_reason: d.end ? stopReason(d.end) : null,
          ...(c.returnTokenIds ? { token_ids: [...d.tokens] } : {}),
        };
  return {
    ...head,
    object: 'chat.completion.chunk',
    choices: [choice],
    ...(c.includeUsage ? { usage: null } : {}),
  };
}

/** stream_options.include_usage's last chunk: no choices, the request's usage. */
export function usageChunk(
  head: StreamHead,
  object: 'text_completion' | 'chat.completion.chunk',
  promptTokens: number,
  completionTokens: number,
) {
  return {
    ...head,
    object,
    choices: [],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    },
  };
}

/** GET /v1/models: the base model and each loaded LoRA adapter (its parent the base), as vLLM lists them. */
export function modelList(
  base: { name: string; root: string; maxModelLen: number },
  adapters: readonly { name: string; path: string }[],
) {
  const created = now();
  const card = (id: string, root: string, parent: string | null) => ({
    id,
    object: 'model',
    created,
    owned_by: ENGINE_SERVER_OWNER,
    root,
    parent,
    max_model_len: base.maxModelLen,
    permission: [],
  });
  return {
    object: 'list',
    data: [card(base.name, base.root, null), ...adapters.map((a) => card(a.name, a.path, base.name))],
  };
}
