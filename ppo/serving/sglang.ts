// SGLang's native routes' request and response shapes (python/sglang/srt/managers/io_struct.py GenerateReqInput,
// UpdateWeightFromDiskReqInput, LoadLoRAAdapterReqInput; python/sglang/srt/entrypoints/http_server.py; the
// sampling parameters of docs/backend/sampling_params.md): /generate, /update_weights_from_disk,
// /load_lora_adapter, /unload_lora_adapter, /get_model_info.
import { ApiError, badRequest } from './api-error.ts';
import { RequestFields } from './request-fields.ts';
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
import type { ReportedScores } from './prompt-report.ts';
import { MAX_TOP_LOGPROBS } from '../../kernels/decode/top-logprobs.ts';

/** SGLang's SamplingParams default max_new_tokens. */
export const GENERATE_DEFAULT_MAX_NEW_TOKENS = 128;

export interface GenerateRequest {
  request: GenerationRequest;
  returnLogprob: boolean;
  /** The first prompt token whose log-prob is reported (SGLang's logprob_start_len; -1: the last prompt token). */
  logprobStartLen: number;
  /** rid: echoed as meta_info.id. */
  rid: string | null;
  /**
   * SGLang's token_ids_logprob: per prompt, the tokens whose log-probs are reported at each position (one list for
   * every prompt, or a list per prompt); null: none.
   */
  tokenIdsLogprob: number[][] | null;
  /** A batch of prompts (text or input_ids a list of them): SGLang answers a list even for one sample. */
  batch: boolean;
  /** Server-Sent Events: each sample's text and output_ids so far at every read, then `data: [DONE]`. */
  stream: boolean;
}

export function parseGenerateRequest(body: unknown, defaults: SamplingDefaults = NEUTRAL_SAMPLING): GenerateRequest {
  const f = RequestFields.of(body);
  if (f.has('text') === f.has('input_ids'))
    throw new ApiError(400, 'exactly one of text and input_ids must be given', f.has('text') ? 'input_ids' : 'text');
  const input = f.has('text') ? f.raw('text') : f.raw('input_ids');
  const prompts = promptInputs(input, f.has('text') ? 'text' : 'input_ids');
  const batch = Array.isArray(input) && input.some((p) => typeof p !== 'number');
  if (f.has('input_embeds') || f.has('image_data'))
    throw new ApiError(400, 'input_embeds and image_data are not supported by this server', 'input_embeds');
  if (Array.isArray(f.raw('sampling_params'))) {
    throw badRequest(
      'sampling_params',
      'one object for every prompt (a list of per-prompt sampling_params is not supported by this server)',
      '[...]',
    );
  }
  const s = f.object('sampling_params');
  refuseUnsupportedSampling(s);
  const sampling = samplingFields(s, defaults);
  const seed = s.has('sampling_seed') ? s.optionalInteger('sampling_seed') : s.optionalInteger('seed');
  // SGLang takes one name, or a list of one per input: here the list must name one adapter (a batch runs one).
  const given = f.raw('lora_path');
  const names = Array.isArray(given) ? [...new Set(given)] : [given];
  const lora = names.length === 1 ? names[0] : given;
  if (lora !== undefined && lora !== null && typeof lora !== 'string') {
    throw badRequest(
      'lora_path',
      'the name of a loaded adapter, or a list naming the same one for every input (one adapter per request)',
      given,
    );
  }
  const rid = f.raw('rid');
  const returnLogprob = f.boolean('return_logprob', false);
  const logprobStartLen = f.number('logprob_start_len', -1, { integer: true, min: -1 });
  const topLogprobs = f.number('top_logprobs_num', 0, { integer: true, min: 0, max: MAX_TOP_LOGPROBS });
  const tokenIdsLogprob = tokenIdLists(f.raw('token_ids_logprob'), prompts.length);
  const stream = f.boolean('stream', false);
  // They come from a scoring pass over each finished response, after the last chunk a stream would send.
  if (stream && returnLogprob && tokenIdsLogprob !== null)
    throw new ApiError(400, 'token_ids_logprob: not available when stream is true (this server)', 'token_ids_logprob');
  return {
    request: {
      prompts,
      n: sampling.n,
      maxTokens: s.has('max_new_tokens') ? s.number('max_new_tokens', 0, { integer: true }) : null,
      temperature: sampling.temperature,
      topP: sampling.topP,
      topK: sampling.topK,
      seed: { seed: seedOf(seed), sampleOffset: sampling.sampleOffset },
      stop: s.strings('stop'),
      stopTokenIds: sampling.stopTokenIds,
      keepStopString: s.boolean('no_stop_trim', false),
      skipSpecialTokens: s.boolean('skip_special_tokens', true),
      adapter: (lora as string | null | undefined) ?? null,
      topLogprobs,
      processing: processingFields(s, 'min_new_tokens', defaults),
      // -1 reports the last prompt token only, whose log-prob SGLang leaves null: nothing to score.
      promptLogprobs: returnLogprob && logprobStartLen !== -1 ? topLogprobs : null,
      truncatePromptTokens: null,
    },
    returnLogprob,
    logprobStartLen,
    rid: typeof rid === 'string' ? rid : null,
    tokenIdsLogprob,
    batch,
    stream,
  };
}

/** token_ids_logprob as one list per prompt: a list of ids (every prompt's) or a list of lists (one per prompt). */
function tokenIdLists(value: unknown, prompts: number): number[][] | null {
  if (value === undefined || value === null) return null;
  const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x) && x >= 0);
  if (isIds(value)) return Array.from({ length: prompts }, () => value);
  if (Array.isArray(value) && value.length === prompts && value.every(isIds)) return value;
  throw badRequest(
    'token_ids_logprob',
    `a list of token ids, or one list per prompt (${prompts} here), each id an integer ≥ 0`,
    value,
  );
}

/** A sample so far (`end` null while it generates) or finished. */
export interface GeneratedSample {
  text: string;
  tokens: readonly number[];
  logprobs: ArrayLike<number>;
  promptTokens: number;
  end: Pick<CompletionText, 'finishReason' | 'matched'> | null;
  /** Per token, its alternatives (top_logprobs_num), when asked for. */
  top: { ids: number[][]; logprobs: number[][] } | null;
  promptIds: readonly number[];
  /** Its prompt's scores, when logprob_start_len ≥ 0. */
  promptScores?: ReportedScores | null;
  /** token_ids_logprob's tokens and their log-probs at each generated token, (tokens, ids) row-major. */
  tokenIdLogprobs?: { ids: readonly number[]; logprobs: Float32Array } | null;
}

/** A random request id, as SGLang makes one. */
export function newRid(): string {
  return Array.from({ length: 32 }, () => Math.floor(Math.random() * 16).toString(16)).join('');
}

/** SGLang's finish_reason: null while generating, {type: "stop", matched}, {type: "length", length} or abort. */
function finishReason(s: GeneratedSample) {
  if (s.end === null) return null;
  if (s.end.finishReason === 'length') return { type: 'length', length: s.tokens.length };
  if (s.end.finishReason === 'abort') return { type: 'abort', message: 'the request was aborted' };
  return { type: 'stop', matched: s.end.matched };
}

/** One sample's output, sample i of `count` (its id `${rid}-${i}` when there are several). */
export function generateOutput(
  s: GeneratedSample,
  i: number,
  count: number,
  g: Pick<GenerateRequest, 'returnLogprob' | 'logprobStartLen'> & { rid: string },
  latencySeconds: number,
  weightVersion: string,
) {
  return {
    text: s.text,
    output_ids: [...s.tokens],
    meta_info: {
      id: count > 1 ? `${g.rid}-${i}` : g.rid,
      finish_reason: finishReason(s),
      prompt_tokens: s.promptTokens,
      completion_tokens: s.tokens.length,
      cached_tokens: 0,
      weight_version: weightVersion,
      e2e_latency: latencySeconds,
      // [logprob, token id, token text]: the text only with return_text_in_logprobs, which this server leaves null.
      ...(g.returnLogprob ? inputLogprobs(s, g.logprobStartLen) : {}),
      ...(g.returnLogprob ? { output_token_logprobs: s.tokens.map((id, t) => [s.logprobs[t], id, null]) } : {}),
      ...(g.returnLogprob && s.top
        ? {
            output_top_logprobs: s.top.ids.map((ids, t) => ids.map((id, k) => [s.top!.logprobs[t][k], id, null])),
          }
        : {}),
      ...(g.returnLogprob && s.tokenIdLogprobs
        ? { output_token_ids_logprobs: s.tokens.map((_, t) => idLogprobs(s.tokenIdLogprobs!, t)) }
        : {}),
    },
  };
}

/** Position t's [logprob, id, null] of each of token_ids_logprob's tokens, in the order asked. */
function idLogprobs(g: { ids: readonly number[]; logprobs: Float32Array }, t: number) {
  return g.ids.map((id, j) => [g.logprobs[t * g.ids.length + j], id, null]);
}

/**
 * SGLang's input_token_logprobs: [logprob, id, null] for each prompt token from logprob_start_len (-1: the last),
 * the first always null as SGLang leaves it; with top_logprobs_num, input_top_logprobs alike (the first null), and
 * with token_ids_logprob, input_token_ids_logprobs alike.
 */
function inputLogprobs(s: GeneratedSample, logprobStartLen: number) {
  const { promptIds: ids, promptScores: scores } = s;
  const start = logprobStartLen === -1 ? ids.length - 1 : logprobStartLen;
  const positions = ids.slice(start).map((id, i) => ({ id, p: start + i - 1, first: i === 0 }));
  return {
    input_token_logprobs: positions.map(({ id, p, first }) => [first ? null : scores!.logprobs[p], id, null]),
    ...(s.top && scores
      ? {
          input_top_logprobs: positions.map(({ p, first }) =>
            first ? null : scores.top.ids[p].map((alt, k) => [scores.top.logprobs[p][k], alt, null]),
          ),
        }
      : s.top
        ? { input_top_logprobs: [null] }
        : {}),
    ...(scores?.gathered
      ? { input_token_ids_logprobs: positions.map(({ p, first }) => (first ? null : idLogprobs(scores.gathered!, p))) }
      : s.tokenIdLogprobs
        ? { input_token_ids_logprobs: [null] }
        : {}),
  };
}

/** Every sample's response; /generate answers a list of them for a batch of prompts or n > 1, else the one object. */
export function generateResponse(
  samples: readonly GeneratedSample[],
  g: Pick<GenerateRequest, 'returnLogprob' | 'logprobStartLen' | 'rid' | 'batch'>,
  latencySeconds: number,
  weightVersion: string,
) {
  const rid = g.rid ?? newRid();
  const outputs = samples.map((s, i) =>
    generateOutput(s, i, samples.length, { ...g, rid }, latencySeconds, weightVersion),
  );
  return g.batch || outputs.length > 1 ? outputs : outputs[0];
}

/** SGLang's /abort_request: a request's rid, or abort_all. */
export function parseAbortRequest(body: unknown): { rid: string | null; all: boolean } {
  const f = RequestFields.of(body);
  const all = f.boolean('abort_all', false);
  if (!all && !f.has('rid'))
    throw badRequest('rid', 'the rid of a running /generate request (or abort_all)', undefined);
  return { rid: f.has('rid') ? f.string('rid', '') : null, all };
}

export function parseUpdateWeightsRequest(body: unknown): { modelPath: string; weightVersion: string | null } {
  const f = RequestFields.of(body);
  if (!f.has('model_path')) throw badRequest('model_path', 'the directory of a Hugging Face checkpoint', undefined);
  f.unsupported('load_format', 'auto', 'only the Hugging Face safetensors directory format is read');
  return {
    modelPath: f.string('model_path', ''),
    weightVersion: f.has('weight_version') ? f.string('weight_version', '') : null,
  };
}

export function parseLoraRequest(body: unknown, needsPath: boolean): { name: string; path: string } {
  const f = RequestFields.of(body);
  if (!f.has('lora_name')) throw badRequest('lora_name', 'a name for the adapter', undefined);
  if (needsPath && !f.has('lora_path')) throw badRequest('lora_path', 'the directory of a PEFT adapter', undefined);
  return { name: f.string('lora_name', ''), path: f.string('lora_path', '') };
}
