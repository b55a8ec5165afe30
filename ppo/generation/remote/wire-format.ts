// The HTTP shapes the trainer speaks to a rollout server, per backend (actor_rollout_ref.rollout.name), as the
// servers document them; `node serve.js` speaks the SGLang ones. Each parser names the URL and what it expected.
//   SGLang: python/sglang/srt/managers/io_struct.py (GenerateReqInput: input_ids, sampling_params, return_logprob,
//     lora_path; UpdateWeightFromDiskReqInput: model_path → {success, message};
//     LoadLoRAAdapterReqInput: lora_name, lora_path) and python/sglang/srt/entrypoints/http_server.py (/generate
//     answers {text, output_ids, meta_info: {finish_reason: {type, matched}, output_token_logprobs: [[logprob, id,
//     text], …]}}, one such object per input when input_ids is a batch).
//   vLLM: vllm/entrypoints/openai/protocol.py (CompletionRequest: prompt as token ids, n, temperature, top_p, top_k,
//     max_tokens, seed, logprobs, stop_token_ids, return_tokens_as_token_ids → choices[{index, logprobs:
//     {tokens: ["token_id:7", …], token_logprobs}, finish_reason}]; LoadLoRAAdapterRequest: lora_name, lora_path),
//     docs/features/sleep_mode.md (VLLM_SERVER_DEV_MODE=1: /sleep?level=2, /wake_up?tags=weights,
//     /collective_rpc {"method": "reload_weights"}, /wake_up?tags=kv_cache).
import type { FinishReason } from '../types.ts';

export type RolloutBackend = 'sglang' | 'vllm';

/** `owned_by` of this engine's `node serve.js` (in /v1/models and /get_model_info): the one backend that takes
 *  `sample_offset`, so its samples are the in-process rollout's (docs/serving.md); vLLM and SGLang would refuse it. */
export const ENGINE_SERVER_OWNER = 'webgpu-rlhf';

/** One HTTP call: method, path (with its query) and JSON body. */
export interface HttpCall {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
}

export interface SamplingRequest {
  temperature: number;
  topP: number;
  /** -1 or 0: all tokens. */
  topK: number;
  maxTokens: number;
  stopTokenIds: readonly number[];
  /** vLLM's and SGLang's ignore_eos: generation goes on after an EOS. */
  ignoreEos: boolean;
  seed: number;
  /** The random stream of the first sample (serve.js's `sample_offset`); null: not sent (vLLM, SGLang). */
  sampleOffset: number | null;
}

/** One generated response: its token ids (a stop token included), each token's log-prob as the server sampled it. */
export interface ServerSample {
  tokenIds: number[];
  logProbs: number[];
  finishReason: FinishReason;
}

/** The weights a server should serve: a full checkpoint directory, or a LoRA adapter directory over the base. */
export interface WeightsVersion {
  version: number;
  dir: string;
  kind: 'full' | 'lora';
}

/** A response that is not the documented shape: thrown with what was expected, the URL added by the caller. */
export class WireFormatError extends Error {}

function expect(condition: unknown, what: string): asserts condition {
  if (!condition) throw new WireFormatError(what);
}

const isNumberArray = (x: unknown): x is number[] => Array.isArray(x) && x.every((v) => typeof v === 'number');

/** The adapter's name on the server: one per version, so no server ever mixes two versions under one name. */
export const loraName = (version: number) => `actor_v${version}`;

/** n samples of one prompt. SGLang: the prompt repeated n times in one batched /generate (one answer per input, in
 *  order); vLLM: one /v1/completions with n. `lora` names the adapter to generate with, null for the full model. */
export function generateCall(
  backend: RolloutBackend,
  model: string,
  promptIds: readonly number[],
  n: number,
  s: SamplingRequest,
  lora: string | null,
): HttpCall {
  if (backend === 'sglang') {
    return {
      method: 'POST',
      path: '/generate',
      body: {
        input_ids: Array.from({ length: n }, () => [...promptIds]),
        sampling_params: {
          temperature: s.temperature,
          top_p: s.topP,
          top_k: s.topK,
          max_new_tokens: s.maxTokens,
          stop_token_ids: [...s.stopTokenIds],
          ...(s.ignoreEos ? { ignore_eos: true } : {}),
          skip_special_tokens: false,
          no_stop_trim: true,
          sampling_seed: s.seed,
          ...(s.sampleOffset === null ? {} : { sample_offset: s.sampleOffset }),
        },
        return_logprob: true,
        ...(lora ? { lora_path: Array.from({ length: n }, () => lora) } : {}),
      },
    };
  }
  return {
    method: 'POST',
    path: '/v1/completions',
    body: {
      model: lora ?? model,
      prompt: [...promptIds],
      n,
      temperature: s.temperature,
      top_p: s.topP,
      top_k: s.topK,
      max_tokens: s.maxTokens,
      seed: s.seed,
      logprobs: 1,
      stop_token_ids: [...s.stopTokenIds],
      ...(s.ignoreEos ? { ignore_eos: true } : {}),
      skip_special_tokens: false,
      include_stop_str_in_output: true,
      return_tokens_as_token_ids: true,
      ...(s.sampleOffset === null ? {} : { sample_offset: s.sampleOffset }),
    },
  };
}

/** The n samples of a generateCall's answer, in order. */
export function parseGenerate(
  backend: RolloutBackend,
  json: unknown,
  n: number,
  stopTokenIds: readonly number[],
): ServerSample[] {
  if (backend === 'sglang') {
    expect(Array.isArray(json) && json.length === n, `a JSON array of ${n} /generate outputs (one per input_ids row)`);
    return json.map((out: unknown) => {
      const meta = (out as { meta_info?: Record<string, unknown> } | null)?.meta_info;
      expect(
        meta && Array.isArray(meta.output_token_logprobs),
        'meta_info.output_token_logprobs (return_logprob=true)',
      );
      const entries = meta.output_token_logprobs as unknown[];
      expect(
        entries.every((e) => Array.isArray(e) && typeof e[0] === 'number' && Number.isInteger(e[1])),
        'output_token_logprobs entries [logprob, token_id, text]',
      );
      const tokenIds = entries.map((e) => (e as number[])[1]);
      const finish = meta.finish_reason as { type?: unknown } | null;
      expect(
        finish && (finish.type === 'length' || finish.type === 'stop' || finish.type === 'abort'),
        'meta_info.finish_reason.type "stop" or "length"',
      );
      expect(finish.type !== 'abort', 'a finished generation, got finish_reason "abort"');
      return {
        tokenIds,
        logProbs: entries.map((e) => (e as number[])[0]),
        finishReason: finishReason(finish.type === 'length', tokenIds, stopTokenIds),
      };
    });
  }
  const choices = (json as { choices?: unknown } | null)?.choices;
  expect(Array.isArray(choices) && choices.length === n, `choices: an array of n=${n} completions`);
  const ordered = [...choices].sort((a, b) => (a as { index: number }).index - (b as { index: number }).index);
  return ordered.map((choice: unknown) => {
    const c = choice as { logprobs?: { tokens?: unknown; token_logprobs?: unknown }; finish_reason?: unknown };
    expect(
      c.logprobs && Array.isArray(c.logprobs.tokens) && isNumberArray(c.logprobs.token_logprobs),
      'choices[].logprobs.tokens and token_logprobs (logprobs=1)',
    );
    const tokenIds = (c.logprobs.tokens as unknown[]).map((t) => {
      const m = typeof t === 'string' ? /^token_id:(\d+)$/.exec(t) : null;
      expect(m, `tokens as "token_id:<id>" (return_tokens_as_token_ids=true), got ${JSON.stringify(t)}`);
      return Number(m[1]);
    });
    expect(c.finish_reason === 'stop' || c.finish_reason === 'length', 'choices[].finish_reason "stop" or "length"');
    return {
      tokenIds,
      logProbs: c.logprobs.token_logprobs as number[],
      finishReason: finishReason(c.finish_reason === 'length', tokenIds, stopTokenIds),
    };
  });
}

/**
 * The rollout's reasons: eos when the response ends on one of the stop (EOS) ids, as the in-process rollout records it.
 */
function finishReason(length: boolean, tokenIds: readonly number[], stopTokenIds: readonly number[]): FinishReason {
  if (length) return 'length';
  return stopTokenIds.includes(tokenIds[tokenIds.length - 1]) ? 'eos' : 'stop';
}

/** What the server must answer to show it is a live server of its backend: the served model's identity. */
export function modelInfoCall(backend: RolloutBackend): HttpCall {
  return backend === 'sglang' ? { method: 'GET', path: '/get_model_info' } : { method: 'GET', path: '/v1/models' };
}

export interface ServedModel {
  /** The served model's name (vLLM routes completions by it; SGLang's model_path, for messages). */
  name: string;
  /** This engine's `node serve.js`: it takes sample_offset. */
  engineServer: boolean;
}

export function parseModelInfo(backend: RolloutBackend, json: unknown): ServedModel {
  if (backend === 'sglang') {
    const info = json as { model_path?: unknown; owned_by?: unknown } | null;
    expect(typeof info?.model_path === 'string', '/get_model_info {model_path}');
    return { name: info.model_path, engineServer: info.owned_by === ENGINE_SERVER_OWNER };
  }
  const card = (json as { data?: { id?: unknown; owned_by?: unknown }[] } | null)?.data?.[0];
  expect(typeof card?.id === 'string', '/v1/models {data: [{id}]}');
  return { name: card.id, engineServer: card.owned_by === ENGINE_SERVER_OWNER };
}

/**
 * The calls that make a server serve `weights`, in order, each answering success or an HTTP error. SGLang reloads
 * a full checkpoint from any directory; vLLM over plain HTTP reloads full weights only from the path it was
 * launched with (sleep_mode.md's level-2 sequence), so its launch path is the weights directory's `current` link,
 * which the publisher moves to each version before these calls. LoRA: load the version's adapter under its own name,
 * then unload the previous one.
 */
export function weightUpdateCalls(
  backend: RolloutBackend,
  weights: WeightsVersion,
  previousLora: string | null,
): HttpCall[] {
  const unload = (path: string): HttpCall[] =>
    previousLora ? [{ method: 'POST', path, body: { lora_name: previousLora } }] : [];
  if (weights.kind === 'lora') {
    const load: HttpCall = {
      method: 'POST',
      path: backend === 'sglang' ? '/load_lora_adapter' : '/v1/load_lora_adapter',
      body: { lora_name: loraName(weights.version), lora_path: weights.dir },
    };
    return [load, ...unload(backend === 'sglang' ? '/unload_lora_adapter' : '/v1/unload_lora_adapter')];
  }
  // weight_version: SGLang reports it in /get_model_info and each /generate's meta_info.
  if (backend === 'sglang')
    return [
      {
        method: 'POST',
        path: '/update_weights_from_disk',
        body: { model_path: weights.dir, weight_version: `v${weights.version}` },
      },
    ];
  return [
    { method: 'POST', path: '/sleep?level=2' },
    { method: 'POST', path: '/wake_up?tags=weights' },
    { method: 'POST', path: '/collective_rpc', body: { method: 'reload_weights' } },
    { method: 'POST', path: '/wake_up?tags=kv_cache' },
  ];
}

/**
 * SGLang answers weight updates with {success, message} and status 200 even when it refused; vLLM with an HTTP error.
 */
export function checkUpdateAnswer(json: unknown): void {
  if (json && typeof json === 'object' && 'success' in json) {
    const { success, message } = json as { success: unknown; message?: unknown };
    expect(
      success === true,
      `success: true, got success: ${JSON.stringify(success)}${typeof message === 'string' ? ` (${message})` : ''}`,
    );
  }
}
