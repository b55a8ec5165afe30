// What every generation route asks the scheduler for, whatever its protocol (OpenAI, SGLang): prompts as text or
// token ids, n samples each, a token budget, sampling parameters and stop conditions; and the checks of a
// request against the served model before it waits for a slot.
import { ApiError, badRequest } from './api-error.ts';
import { MAX_LOGIT_BIAS, type RowProcessing } from '../../kernels/decode/logits-processors.ts';
import { RequestFields, isObject } from './request-fields.ts';

/** A prompt as the client sent it: text to tokenize, or token ids. */
export type PromptInput = { text: string } | { ids: number[] };

/**
 * A sample's random stream: (seed, sampleOffset + j) for the request's j-th sample (prompt-major: j = prompt·n + k).
 */
export interface SeedSpec {
  seed: number;
  sampleOffset: number;
}

export interface GenerationRequest {
  prompts: PromptInput[];
  n: number;
  /** null: the route's default budget, at most the server's. */
  maxTokens: number | null;
  temperature: number;
  topP: number;
  topK: number;
  seed: SeedSpec;
  stop: string[];
  stopTokenIds: number[];
  /** Stop strings stay in the returned text (vLLM's include_stop_str_in_output; SGLang's no_stop_trim). */
  keepStopString: boolean;
  skipSpecialTokens: boolean;
  /** A LoRA adapter loaded by name (/load_lora_adapter), or null for the base model. */
  adapter: string | null;
  /** Most likely alternatives reported per generated token, with their log-probs (0: none). */
  topLogprobs: number;
  /** Penalties, logit_bias, ignore_eos, min_tokens, min_p. */
  processing: RowProcessing;
  /**
   * Prompt log-probs with this many alternatives per position (vLLM's prompt_logprobs, or logprobs with echo;
   * SGLang's logprob_start_len ≥ 0 with top_logprobs_num), null: none. With them a budget of 0 tokens is allowed.
   */
  promptLogprobs: number | null;
  /** The prompt's last N tokens only (vLLM's truncate_prompt_tokens; -1: at most --max-prompt-tokens), null: all. */
  truncatePromptTokens: number | null;
}

/** The served model's limits, fixed when the server starts. */
export interface ServerLimits {
  maxPromptTokens: number;
  maxNewTokens: number;
  vocabSize: number;
  /** Samples one request may ask for (prompts × n). */
  maxSamples: number;
}

/** A 32-bit seed from the request's integer (taken modulo 2³²), or a random one when it sets none. */
export function seedOf(seed: number | null): number {
  if (seed === null) return Math.floor(Math.random() * 2 ** 32);
  return Number(BigInt.asUintN(32, BigInt(seed)));
}

/**
 * A request's sampling where it sets none: OpenAI's neutral values, or the model's generation_config.json (its
 * temperature, top_p, top_k, and the repetition_penalty and min_p of the logits processing).
 */
export interface SamplingDefaults {
  temperature: number;
  topP: number;
  topK: number;
  repetitionPenalty: number;
  minP: number;
}

export const NEUTRAL_SAMPLING: SamplingDefaults = { temperature: 1, topP: 1, topK: -1, repetitionPenalty: 1, minP: 0 };

/**
 * The sampling defaults a model's generation_config.json sets, as vLLM applies them (--generation-config auto):
 * temperature, top_p, top_k, repetition_penalty and min_p where the file has them, the neutral value elsewhere. A
 * value out of range is an error naming the file.
 */
export function generationConfigDefaults(raw: Record<string, unknown> | null, file: string): SamplingDefaults {
  const f = new RequestFields(raw ?? {}, `${file}: `);
  const topK = f.number('top_k', NEUTRAL_SAMPLING.topK, { integer: true, min: -1 });
  return {
    temperature: f.number('temperature', NEUTRAL_SAMPLING.temperature, { min: 0 }),
    topP: f.number('top_p', NEUTRAL_SAMPLING.topP, { above: 0, max: 1 }),
    topK: topK === 0 ? -1 : topK,
    repetitionPenalty: f.number('repetition_penalty', NEUTRAL_SAMPLING.repetitionPenalty, { above: 0 }),
    minP: f.number('min_p', NEUTRAL_SAMPLING.minP, { min: 0, max: 1 }),
  };
}

/** The sampling fields OpenAI and SGLang name alike (temperature, top_p, top_k, n), read from `f`. */
export function samplingFields(f: RequestFields, defaults: SamplingDefaults = NEUTRAL_SAMPLING) {
  return {
    temperature: f.number('temperature', defaults.temperature, { min: 0 }),
    topP: f.number('top_p', defaults.topP, { above: 0, max: 1 }),
    // vLLM and SGLang: -1 turns top-k off; 0 does too in vLLM.
    topK: Math.max(-1, f.number('top_k', defaults.topK, { integer: true, min: -1 })),
    n: f.number('n', 1, { integer: true, min: 1 }),
    stopTokenIds: f.integers('stop_token_ids'),
    sampleOffset: f.number('sample_offset', 0, { integer: true, min: 0, max: 2 ** 32 - 1 }),
  };
}

/**
 * The logits processing vLLM and SGLang name alike (repetition_penalty, presence_penalty, frequency_penalty, min_p,
 * logit_bias, ignore_eos, and vLLM's min_tokens or SGLang's min_new_tokens), read from `f`.
 */
export function processingFields(
  f: RequestFields,
  minTokensKey: 'min_tokens' | 'min_new_tokens',
  defaults: SamplingDefaults = NEUTRAL_SAMPLING,
): RowProcessing {
  const bias = f.raw('logit_bias');
  const logitBias = new Map<number, number>();
  if (bias !== undefined && bias !== null) {
    const entries = isObject(bias) ? Object.entries(bias) : null;
    const valid = entries?.every(
      ([id, b]) => /^\d+$/.test(id) && typeof b === 'number' && Number.isFinite(b) && b >= -100 && b <= 100,
    );
    if (!entries || !valid || entries.length > MAX_LOGIT_BIAS)
      throw badRequest(
        f.name('logit_bias'),
        `an object of at most ${MAX_LOGIT_BIAS} token ids (as strings) to biases in [-100, 100]`,
        bias,
      );
    for (const [id, b] of entries) logitBias.set(Number(id), b as number);
  }
  return {
    // vLLM takes any positive value (SGLang (0, 2]).
    repetitionPenalty: f.number('repetition_penalty', defaults.repetitionPenalty, { above: 0 }),
    presencePenalty: f.number('presence_penalty', 0, { min: -2, max: 2 }),
    frequencyPenalty: f.number('frequency_penalty', 0, { min: -2, max: 2 }),
    logitBias,
    minTokens: f.number(minTokensKey, 0, { integer: true, min: 0 }),
    ignoreEos: f.boolean('ignore_eos', false),
    minP: f.number('min_p', defaults.minP, { min: 0, max: 1 }),
  };
}

/** The sampling knobs this engine does not implement: each refused at any value but its neutral one. */
export function refuseUnsupportedSampling(f: RequestFields): void {
  // {"type": "text"} is the default format, which SDKs send: it constrains nothing.
  const format = f.raw('response_format');
  const plainText = isObject(format) && format.type === 'text' && Object.keys(format).length === 1;
  for (const key of [
    'regex',
    'json_schema',
    'ebnf',
    'guided_json',
    'guided_regex',
    'response_format',
    'structural_tag',
  ]) {
    if (f.has(key) && !(key === 'response_format' && plainText))
      throw new ApiError(400, `${f.name(key)}: constrained decoding is not supported by this server`, f.name(key));
  }
}

/**
 * Prompt token ids checked against the vocabulary and the server's lengths; the budget resolved. `minTokens` is 0
 * for a request that asks for its prompt's log-probs (lm-evaluation-harness scores with max_tokens 0), else 1.
 */
export function checkPromptIds(
  prompts: readonly number[][],
  maxTokens: number | null,
  defaultMaxTokens: number,
  n: number,
  limits: ServerLimits,
  param: string,
  minTokens: 0 | 1 = 1,
): number {
  prompts.forEach((ids, i) => {
    const where = prompts.length > 1 ? `${param}[${i}]` : param;
    if (ids.length === 0) throw new ApiError(400, `${where}: the prompt is empty`, param);
    if (ids.length > limits.maxPromptTokens) {
      throw new ApiError(
        400,
        `${where}: the prompt has ${ids.length} tokens, more than this server's --max-prompt-tokens ` +
          `${limits.maxPromptTokens}`,
        param,
      );
    }
    const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= limits.vocabSize);
    if (bad !== undefined)
      throw new ApiError(400, `${where}: token id ${bad} is outside the vocabulary [0, ${limits.vocabSize})`, param);
  });
  if (prompts.length * n > limits.maxSamples) {
    throw new ApiError(
      400,
      `${prompts.length} prompts × n=${n} = ${prompts.length * n} samples, more than this server takes in one ` +
        `request (${limits.maxSamples})`,
      'n',
    );
  }
  if (maxTokens !== null && (maxTokens < minTokens || maxTokens > limits.maxNewTokens)) {
    throw badRequest(
      'max_tokens',
      `an integer in [${minTokens}, ${limits.maxNewTokens}] (this server's --max-new-tokens` +
        `${minTokens === 0 ? '; 0 with prompt log-probs' : ''})`,
      maxTokens,
    );
  }
  return maxTokens ?? Math.min(defaultMaxTokens, limits.maxNewTokens);
}

/**
 * vLLM's truncate_prompt_tokens: the last N tokens of each prompt (-1: --max-prompt-tokens); more than the server
 * takes is a 400, as vLLM refuses more than max_model_len.
 */
export function truncatePrompts(prompts: number[][], keep: number | null, limits: ServerLimits): number[][] {
  if (keep === null) return prompts;
  const n = keep === -1 ? limits.maxPromptTokens : keep;
  if (n < 1 || n > limits.maxPromptTokens)
    throw badRequest(
      'truncate_prompt_tokens',
      `-1 or an integer in [1, ${limits.maxPromptTokens}] (this server's --max-prompt-tokens)`,
      keep,
    );
  return prompts.map((ids) => ids.slice(-n));
}

/** `prompt` / `input_ids` / `text` values: one prompt or a batch, as text or token ids. */
export function promptInputs(value: unknown, param: string): PromptInput[] {
  const isIds = (v: unknown): v is number[] =>
    Array.isArray(v) && v.length > 0 && v.every((id) => Number.isInteger(id));
  if (typeof value === 'string') return [{ text: value }];
  if (isIds(value)) return [{ ids: value }];
  if (Array.isArray(value) && value.length > 0) {
    if (value.every((v) => typeof v === 'string')) return (value as string[]).map((text) => ({ text }));
    if (value.every(isIds)) return value.map((ids) => ({ ids }));
  }
  throw badRequest(
    param,
    'a string, a list of strings, a list of token ids or a list of lists of token ids (none empty)',
    value,
  );
}
