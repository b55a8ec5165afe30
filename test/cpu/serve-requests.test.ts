// ppo/serving without a device: the OpenAI and SGLang request parsers (defaults, the fields refused with a 400 naming
// them), the response shapes, stop-string trimming, the command line, and the scheduler's ordering of requests
// and exclusive work (weight updates) over a stand-in decode loop.
import { describe, it, expect } from 'vitest';
import { ApiError } from '../../ppo/serving/api-error.ts';
import {
  parseChatRequest,
  parseCompletionRequest,
  completionResponse,
  type ReportedSample,
} from '../../ppo/serving/openai.ts';
import { generateResponse, parseGenerateRequest, parseUpdateWeightsRequest } from '../../ppo/serving/sglang.ts';
import {
  checkPromptIds,
  truncatePrompts,
  generationConfigDefaults,
  promptInputs,
  seedOf,
} from '../../ppo/serving/generation-request.ts';
import { completionText } from '../../ppo/serving/completion-text.ts';
import { Scheduler, type ScheduledRequest } from '../../ppo/serving/scheduler.ts';
import { parseServeArgs, UsageError } from '../../ppo/jobs/serve-job-node.ts';
import { servedDtypes } from '../../ppo/serving/serve-dtype.ts';
import type { SampleQueue } from '../../ppo/generation/continuous-batching.ts';
import type { PromptScores } from '../../ppo/generation/prompt-scoring.ts';

/** The ApiError `parse` throws: its status and body. */
function refusal(parse: () => unknown): { status: number; body: ReturnType<ApiError['body']> } {
  try {
    parse();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, body: err.body() };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('serve request parsing', () => {
  it('reads prompts as text, token ids, or batches of either', () => {
    expect(promptInputs('hi', 'prompt')).toEqual([{ text: 'hi' }]);
    expect(promptInputs([1, 2], 'prompt')).toEqual([{ ids: [1, 2] }]);
    expect(promptInputs([[1], [2, 3]], 'prompt')).toEqual([{ ids: [1] }, { ids: [2, 3] }]);
    expect(promptInputs(['a', 'b'], 'prompt')).toEqual([{ text: 'a' }, { text: 'b' }]);
    for (const bad of [[], [[]], [1, 'a'], 3, [1.5]])
      expect(refusal(() => promptInputs(bad, 'prompt')).body.error.param).toBe('prompt');
  });

  it('SGLang /generate: sampling_params with SGLang defaults; sampling_seed, stop_token_ids and sample_offset', () => {
    const g = parseGenerateRequest({
      input_ids: [[1, 2], [3]],
      return_logprob: true,
      sampling_params: {
        temperature: 0.7,
        top_k: 5,
        top_p: 0.9,
        n: 2,
        max_new_tokens: 6,
        stop: 'x',
        stop_token_ids: [4],
        sampling_seed: 2 ** 32 + 5,
        sample_offset: 8,
      },
    });
    expect(g).toMatchObject({ returnLogprob: true, batch: true });
    expect(g.request).toMatchObject({
      n: 2,
      maxTokens: 6,
      temperature: 0.7,
      topK: 5,
      topP: 0.9,
      stop: ['x'],
      stopTokenIds: [4],
      seed: { seed: 5, sampleOffset: 8 },
    });
    expect(parseGenerateRequest({ text: 'a' })).toMatchObject({
      batch: false,
      request: { maxTokens: null, temperature: 1, topK: -1, topP: 1, n: 1 },
    });
    expect(parseGenerateRequest({ input_ids: [1, 2] }).batch).toBe(false);
    expect(refusal(() => parseGenerateRequest({ text: 'a', input_ids: [1] })).status).toBe(400);
    expect(refusal(() => parseGenerateRequest({ text: 'a', sampling_params: { top_p: 0 } })).body.error).toMatchObject({
      param: 'sampling_params.top_p',
      code: 400,
    });
    expect(
      refusal(() => parseGenerateRequest({ text: 'a', sampling_params: { repetition_penalty: 0 } })).body.error.param,
    ).toBe('sampling_params.repetition_penalty');
    expect(
      parseGenerateRequest({ text: 'a', sampling_params: { repetition_penalty: 1.1 } }).request.processing
        .repetitionPenalty,
    ).toBe(1.1);
    // The logits processing vLLM and SGLang take (SGLang's min_new_tokens, vLLM's min_tokens).
    const knobs = { presence_penalty: 0.5, frequency_penalty: -1, min_p: 0.05, ignore_eos: true, logit_bias: { 7: 3 } };
    expect(
      parseGenerateRequest({ text: 'a', sampling_params: { ...knobs, min_new_tokens: 4 } }).request.processing,
    ).toEqual({
      repetitionPenalty: 1,
      presencePenalty: 0.5,
      frequencyPenalty: -1,
      minP: 0.05,
      ignoreEos: true,
      logitBias: new Map([[7, 3]]),
      minTokens: 4,
    });
    expect(parseCompletionRequest({ prompt: 'a', min_tokens: 2 }).request.processing.minTokens).toBe(2);
    for (const [key, value] of [
      ['presence_penalty', 3],
      ['min_p', 2],
      ['logit_bias', { x: 1 }],
      ['logit_bias', { 1: 101 }],
      ['min_tokens', -1],
    ] as const)
      expect(refusal(() => parseCompletionRequest({ prompt: 'a', [key]: value })).body.error.param).toBe(key);
    expect(parseGenerateRequest({ text: 'a', stream: true }).stream).toBe(true);
    expect(parseGenerateRequest({ text: 'a', top_logprobs_num: 2 }).request.topLogprobs).toBe(2);
    expect(refusal(() => parseGenerateRequest({ text: 'a', top_logprobs_num: 21 })).status).toBe(400);
    // token_ids_logprob: one list for every prompt, or one per prompt; not with a stream (scored after the response).
    expect(parseGenerateRequest({ input_ids: [[1], [2]], token_ids_logprob: [3, 0] }).tokenIdsLogprob).toEqual([
      [3, 0],
      [3, 0],
    ]);
    expect(parseGenerateRequest({ input_ids: [[1], [2]], token_ids_logprob: [[3], [4, 5]] }).tokenIdsLogprob).toEqual([
      [3],
      [4, 5],
    ]);
    expect(parseGenerateRequest({ text: 'a' }).tokenIdsLogprob).toBeNull();
    for (const bad of [[[1], [2]], [-1], 'x', [1.5]])
      expect(refusal(() => parseGenerateRequest({ text: 'a', token_ids_logprob: bad })).body.error.param).toBe(
        'token_ids_logprob',
      );
    const streamed = { text: 'a', token_ids_logprob: [1], return_logprob: true, stream: true };
    expect(refusal(() => parseGenerateRequest(streamed)).body.error.param).toBe('token_ids_logprob');
    expect(refusal(() => parseGenerateRequest('x')).status).toBe(400);
    // lora_path: one name, or SGLang's list of one per input naming the same adapter (a batch runs one).
    expect(parseGenerateRequest({ input_ids: [[1], [2]], lora_path: ['a', 'a'] }).request.adapter).toBe('a');
    expect(parseGenerateRequest({ input_ids: [1], lora_path: 'a' }).request.adapter).toBe('a');
    expect(refusal(() => parseGenerateRequest({ input_ids: [[1], [2]], lora_path: ['a', 'b'] })).body.error.param).toBe(
      'lora_path',
    );
  });

  it('OpenAI /v1/completions and /v1/chat/completions: defaults, vLLM extensions, and what is refused', () => {
    const c = parseCompletionRequest({
      prompt: 'hi',
      n: 3,
      seed: 9,
      logprobs: 0,
      stop: ['\n'],
      top_k: 4,
      return_token_ids: true,
      model: 'm',
    });
    expect(c).toMatchObject({
      logprobs: true,
      returnTokenIds: true,
      model: 'm',
      request: { n: 3, topK: 4, stop: ['\n'], seed: { seed: 9, sampleOffset: 0 }, maxTokens: null },
    });
    expect(parseCompletionRequest({ prompt: [5] }).logprobs).toBe(false);
    expect(parseCompletionRequest({ prompt: 'a', logprobs: 2 }).request.topLogprobs).toBe(2);
    expect(refusal(() => parseCompletionRequest({ prompt: 'a', logprobs: 21 })).body.error.param).toBe('logprobs');
    expect(refusal(() => parseCompletionRequest({ prompt: 'a', best_of: 3 })).body.error.param).toBe('best_of');
    // Prompt log-probs: echo with logprobs scores the prompt with as many alternatives, prompt_logprobs with its own.
    const scored = (body: object) => parseCompletionRequest({ prompt: 'a', ...body }).request.promptLogprobs;
    expect(scored({ echo: true })).toBeNull();
    expect(scored({ echo: true, logprobs: 3 })).toBe(3);
    expect(scored({ prompt_logprobs: 0 })).toBe(0);
    expect(scored({ echo: true, logprobs: 1, prompt_logprobs: 5 })).toBe(5);
    // vLLM's: -1 (the whole vocabulary) and counts above 20 parse; the served model checks them (--max-logprobs).
    expect(scored({ prompt_logprobs: 21 })).toBe(21);
    expect(scored({ prompt_logprobs: -1, echo: true, logprobs: 2 })).toBe(-1);
    expect(refusal(() => scored({ prompt_logprobs: -2 })).body.error.param).toBe('prompt_logprobs');
    expect(refusal(() => scored({ prompt_logprobs: -1, stream: true })).body.error.param).toBe('prompt_logprobs');
    expect(refusal(() => parseCompletionRequest({ prompt: 'a', logprobs: -1 })).body.error.param).toBe('logprobs');
    const chatOf = (body: object) => parseChatRequest({ messages: [{ role: 'user', content: 'a' }], ...body });
    expect(chatOf({ logprobs: true, top_logprobs: -1 }).request.topLogprobs).toBe(-1);
    expect(refusal(() => chatOf({ top_logprobs: -1 })).body.error.param).toBe('top_logprobs');
    expect(refusal(() => scored({ prompt_logprobs: 1, stream: true })).body.error.param).toBe('prompt_logprobs');
    expect(parseGenerateRequest({ text: 'a', return_logprob: true, logprob_start_len: 0 }).request.promptLogprobs).toBe(
      0,
    );
    expect(parseGenerateRequest({ text: 'a', return_logprob: true }).request.promptLogprobs).toBeNull();
    expect(parseGenerateRequest({ text: 'a', logprob_start_len: 0 }).request.promptLogprobs).toBeNull();
    // vLLM's truncate_prompt_tokens keeps the last N tokens; -1 the server's longest prompt; more is a 400.
    const limits = { maxPromptTokens: 3, maxNewTokens: 8, vocabSize: 10, maxSamples: 4 };
    const truncate = (keep: number) =>
      truncatePrompts(
        [[1, 2, 3, 4, 5], [6]],
        parseCompletionRequest({ prompt: 'a', truncate_prompt_tokens: keep }).request.truncatePromptTokens,
        limits,
      );
    expect(truncate(2)).toEqual([[4, 5], [6]]);
    expect(truncate(-1)).toEqual([[3, 4, 5], [6]]);
    expect(refusal(() => truncate(4)).body.error.param).toBe('truncate_prompt_tokens');
    expect(refusal(() => truncate(0)).body.error.param).toBe('truncate_prompt_tokens');
    expect(refusal(() => parseCompletionRequest({ prompt: 'a', temperature: -1 })).body.error).toEqual({
      message: 'temperature: expected a number ≥ 0, got -1',
      type: 'BadRequestError',
      param: 'temperature',
      code: 400,
    });
    expect(refusal(() => parseCompletionRequest({})).body.error.param).toBe('prompt');
    const chat = parseChatRequest({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
      ],
      max_completion_tokens: 3,
      logprobs: true,
    });
    expect(chat).toMatchObject({
      messages: [{ role: 'user', content: 'ab' }],
      addGenerationPrompt: true,
      logprobs: true,
      request: { maxTokens: 3 },
    });
    expect(refusal(() => parseChatRequest({ messages: [] })).body.error.param).toBe('messages');
    // vLLM's echo: the last message when it has the reply's role (the assistant's, or any without a generation prompt).
    const continued = [
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'b' },
    ];
    const echo = (body: object) => parseChatRequest({ echo: true, ...body }).echo;
    expect(echo({ messages: continued })).toBe('b');
    expect(echo({ messages: continued.slice(0, 1) })).toBe('');
    expect(echo({ messages: continued.slice(0, 1), add_generation_prompt: false })).toBe('a');
    expect(parseChatRequest({ messages: continued }).echo).toBe('');
    // Streaming, and the no-op values SDKs send: a plain-text response format, an empty tool list.
    const user = [{ role: 'user', content: 'a' }];
    expect(
      parseChatRequest({
        messages: user,
        stream: true,
        stream_options: { include_usage: true },
        response_format: { type: 'text' },
        tools: [],
        tool_choice: 'none',
      }),
    ).toMatchObject({ stream: true, includeUsage: true });
    expect(parseCompletionRequest({ prompt: 'a', stream: true })).toMatchObject({ stream: true, includeUsage: false });
    expect(refusal(() => parseCompletionRequest({ prompt: 'a', stream_options: {} })).body.error.param).toBe(
      'stream_options',
    );
    for (const [key, value] of [
      ['response_format', { type: 'json_object' }],
      ['tools', [{ type: 'function', function: { name: 'f' } }]],
      ['tool_choice', 'required'],
    ] as const)
      expect(refusal(() => parseChatRequest({ messages: user, [key]: value })).body.error.param).toBe(key);
    // OpenAI takes top_logprobs with logprobs only.
    expect(
      refusal(() => parseChatRequest({ messages: [{ role: 'user', content: 'a' }], top_logprobs: 2 })).body.error.param,
    ).toBe('top_logprobs');
    expect(
      parseChatRequest({ messages: [{ role: 'user', content: 'a' }], logprobs: true, top_logprobs: 2 }).request
        .topLogprobs,
    ).toBe(2);
    expect(
      refusal(() => parseChatRequest({ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] })).body.error
        .param,
    ).toBe('messages[0].content');
  });

  it("applies generation_config.json's sampling where a request sets none (vLLM's)", () => {
    const qwen3 = { temperature: 0.6, top_k: 20, top_p: 0.95, repetition_penalty: 1.05, do_sample: true };
    const defaults = generationConfigDefaults(qwen3, 'm/generation_config.json');
    expect(defaults).toEqual({ temperature: 0.6, topP: 0.95, topK: 20, repetitionPenalty: 1.05, minP: 0 });
    // repetition_penalty and min_p are the logits processing's defaults; a request's own value wins.
    expect(parseCompletionRequest({ prompt: 'a' }, defaults).request.processing.repetitionPenalty).toBe(1.05);
    const own = parseGenerateRequest({ text: 'a', sampling_params: { repetition_penalty: 1, min_p: 0.2 } }, defaults);
    expect(own.request.processing).toMatchObject({ repetitionPenalty: 1, minP: 0.2 });
    expect(generationConfigDefaults({ min_p: 0.05 }, 'g').minP).toBe(0.05);
    expect(parseCompletionRequest({ prompt: 'a' }, defaults).request).toMatchObject({
      temperature: 0.6,
      topP: 0.95,
      topK: 20,
    });
    expect(parseCompletionRequest({ prompt: 'a', temperature: 0, top_k: -1 }, defaults).request).toMatchObject({
      temperature: 0,
      topP: 0.95,
      topK: -1,
    });
    expect(parseGenerateRequest({ text: 'a' }, defaults).request.topK).toBe(20);
    expect(parseChatRequest({ messages: [{ role: 'user', content: 'a' }] }, defaults).request.temperature).toBe(0.6);
    expect(generationConfigDefaults(null, 'g')).toEqual({
      temperature: 1,
      topP: 1,
      topK: -1,
      repetitionPenalty: 1,
      minP: 0,
    });
    expect(generationConfigDefaults({ top_k: 0 }, 'g').topK).toBe(-1);
    expect(() => generationConfigDefaults({ top_p: 2 }, 'm/generation_config.json')).toThrow(
      'm/generation_config.json: top_p',
    );
  });

  it('checks prompts against the vocabulary and the server limits, and resolves the budget', () => {
    const limits = { maxPromptTokens: 4, maxNewTokens: 8, vocabSize: 10, maxSamples: 6 };
    expect(checkPromptIds([[1, 2]], null, 16, 1, limits, 'prompt')).toBe(8);
    expect(checkPromptIds([[1, 2]], 3, 16, 1, limits, 'prompt')).toBe(3);
    expect(
      refusal(() => checkPromptIds([[1, 2, 3, 4, 5]], null, 16, 1, limits, 'prompt')).body.error.message,
    ).toContain('--max-prompt-tokens 4');
    expect(refusal(() => checkPromptIds([[10]], null, 16, 1, limits, 'input_ids')).body.error.message).toContain(
      'token id 10',
    );
    expect(refusal(() => checkPromptIds([[1], [2]], null, 16, 4, limits, 'prompt')).body.error.param).toBe('n');
    expect(refusal(() => checkPromptIds([[1]], 9, 16, 1, limits, 'prompt')).body.error.param).toBe('max_tokens');
    expect(seedOf(-1)).toBe(2 ** 32 - 1);
    expect(Number.isInteger(seedOf(null))).toBe(true);
  });

  it('update_weights_from_disk and the command line name what is missing or wrong', () => {
    expect(parseUpdateWeightsRequest({ model_path: '/m', weight_version: 'v2' })).toEqual({
      modelPath: '/m',
      weightVersion: 'v2',
    });
    expect(refusal(() => parseUpdateWeightsRequest({})).body.error.param).toBe('model_path');
    expect(parseServeArgs(['--model', '/m', '--port=0'])).toMatchObject({
      modelDir: '/m',
      servedModelName: '/m',
      port: 0,
      host: '127.0.0.1',
    });
    expect(parseServeArgs(['--model', '/m'])).toMatchObject({ dtype: 'auto', kvCacheDtype: 'auto' });
    expect(parseServeArgs(['--model', '/m', '--dtype', 'half', '--kv-cache-dtype=bf16'])).toMatchObject({
      dtype: 'half',
      kvCacheDtype: 'bf16',
    });
    expect(() => parseServeArgs(['--model', '/m', '--dtype', 'fp16'])).toThrow(
      /--dtype fp16: expected one of auto, half, float16, bfloat16, float, float32/,
    );
    expect(() => parseServeArgs(['--model', '/m', '--kv-cache-dtype', 'fp8'])).toThrow(
      /fp8 caches are not implemented/,
    );
    expect(() => parseServeArgs(['--port', '1'])).toThrow(/--model DIR is required/);
    expect(() => parseServeArgs(['--model', '/m', '--prot', '1'])).toThrow(UsageError);
    expect(() => parseServeArgs(['--model', '/m', '--port', '70000'])).toThrow(
      /--port 70000: expected an integer in \[0, 65535\]/,
    );
  });
});

describe('--dtype and --kv-cache-dtype', () => {
  it("resolve as vLLM's, except that auto keeps a float32 checkpoint float32", () => {
    expect(servedDtypes('auto', 'auto', 'bfloat16')).toEqual({ weights: 'bf16', cache: 'bf16' });
    expect(servedDtypes('auto', 'auto', 'float16')).toEqual({ weights: 'f16', cache: 'f16' });
    expect(servedDtypes('auto', 'auto', 'float32')).toEqual({ weights: 'f32', cache: 'f32' });
    expect(servedDtypes('half', 'auto', 'bfloat16')).toEqual({ weights: 'f16', cache: 'f16' });
    expect(servedDtypes('float', 'auto', 'bfloat16')).toEqual({ weights: 'f32', cache: 'f32' });
    expect(servedDtypes('float32', 'bf16', 'float32')).toEqual({ weights: 'f32', cache: 'bf16' });
    expect(servedDtypes('bfloat16', 'float16', 'float32')).toEqual({ weights: 'bf16', cache: 'f16' });
  });
});

describe('serve responses', () => {
  const chars = (ids: readonly number[]) => ids.map((i) => String.fromCharCode(96 + i)).join('');
  const decodeChars = {
    decode: async (ids: readonly number[]) => chars(ids),
    decodeBatch: async (ids: readonly (readonly number[])[]) => ids.map(chars),
    skippedIds: new Set<number>(),
  };
  const request = { stop: ['cd', 'b'], stopTokenIds: [9], keepStopString: false, skipSpecialTokens: true };

  it('cuts the text before the first stop string it holds, and reports what ended each sample', async () => {
    const sample = (tokens: number[], reason: 'eos' | 'stop' | 'length') => ({
      prompt: 0,
      tokens,
      logprobs: new Float32Array(tokens.length),
      top: null,
      reason,
    });
    expect(await completionText(decodeChars, sample([1, 3, 4], 'stop'), [], request)).toEqual({
      text: 'a',
      finishReason: 'stop',
      matched: 'cd',
      eos: false,
      tokenTexts: ['a', 'c', 'd'],
    });
    expect(
      await completionText(decodeChars, sample([1, 3, 4], 'stop'), [], { ...request, keepStopString: true }),
    ).toMatchObject({ text: 'acd' });
    expect(await completionText(decodeChars, sample([1, 9], 'stop'), [], request)).toEqual({
      text: 'ai',
      finishReason: 'stop',
      matched: 9,
      eos: false,
      tokenTexts: ['a', 'i'],
    });
    expect(await completionText(decodeChars, sample([1, 5], 'eos'), [], request)).toEqual({
      text: 'ae',
      finishReason: 'stop',
      matched: 5,
      eos: true,
      tokenTexts: ['a', 'e'],
    });
    expect(await completionText(decodeChars, sample([1, 1], 'length'), [], request)).toEqual({
      text: 'aa',
      finishReason: 'length',
      matched: null,
      eos: false,
      tokenTexts: ['a', 'a'],
    });
  });

  it("answers in OpenAI's and SGLang's shapes: one object or a list, log-probs per token", () => {
    const s: ReportedSample = {
      text: 'ab',
      finishReason: 'stop',
      matched: 5,
      eos: true,
      tokens: [1, 2, 5],
      logprobs: Float32Array.of(-1, -2, -0.5),
      tokenTexts: ['a', 'b', ''],
      promptIds: [7],
      top: null,
    };
    const openai = completionResponse('m', [s], 1, { logprobs: true, returnTokenIds: true });
    expect(openai).toMatchObject({
      object: 'text_completion',
      model: 'm',
      usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
      choices: [
        {
          index: 0,
          text: 'ab',
          finish_reason: 'stop',
          stop_reason: null,
          token_ids: [1, 2, 5],
          prompt_token_ids: [7],
          logprobs: {
            tokens: ['a', 'b', ''],
            token_logprobs: [-1, -2, -0.5],
            text_offset: [0, 1, 2],
            top_logprobs: null,
          },
        },
      ],
    });
    const g = { ...s, promptTokens: 1, end: s };
    const one = generateResponse(
      [g],
      { returnLogprob: true, logprobStartLen: -1, rid: 'r', batch: false },
      0.5,
      'default',
    );
    expect(one).toMatchObject({
      text: 'ab',
      output_ids: [1, 2, 5],
      meta_info: {
        id: 'r',
        finish_reason: { type: 'stop', matched: 5 },
        prompt_tokens: 1,
        completion_tokens: 3,
        // SGLang's default logprob_start_len -1: the last prompt token only, its log-prob null.
        input_token_logprobs: [[null, 7, null]],
        output_token_logprobs: [
          [-1, 1, null],
          [-2, 2, null],
          [-0.5, 5, null],
        ],
      },
    });
    const list = generateResponse(
      [g, { ...g, end: { ...s, finishReason: 'length' as const } }],
      { returnLogprob: false, logprobStartLen: -1, rid: null, batch: false },
      0.5,
      'default',
    ) as unknown[];
    expect(list).toHaveLength(2);
    expect(list[1]).toMatchObject({ meta_info: { finish_reason: { type: 'length', length: 3 } } });
    expect(
      generateResponse([g], { returnLogprob: false, logprobStartLen: -1, rid: null, batch: true }, 0, 'v'),
    ).toHaveLength(1);
  });
});

describe('serve scheduler', () => {
  /** A stand-in decode loop: takes up to `slots` samples at each turn, gives each `weights` as its tokens. */
  function fakeLoop(state: { weights: number; loops: string[] }, slots: number) {
    return async (queue: SampleQueue, adapter: string | null) => {
      state.loops.push(adapter ?? 'base');
      const live: ReturnType<SampleQueue['take']> = [];
      for (;;) {
        // Yield, as the real loop does at its reads, so requests can arrive while it decodes.
        await new Promise((resolve) => setTimeout(resolve, 1));
        live.push(...queue.take(slots - live.length));
        if (live.length === 0) return;
        const s = live.shift()!;
        await s.progress.take([state.weights, s.sampling.stream]);
        queue.finished(s, Float32Array.of(s.sampling.seed, s.sampling.temperature));
      }
    };
  }
  const request = (over: Partial<ScheduledRequest> = {}): ScheduledRequest => ({
    prompts: [[1]],
    n: 2,
    budget: 2,
    sampling: { temperature: 1, topK: -1, topP: 1, seed: 3 },
    sampleOffset: 10,
    stopStrings: [],
    stopTokenIds: [],
    adapter: null,
    ...over,
  });

  it(
    'serves requests queued before an exclusive update with the old weights and those after with the ' + 'new',
    async () => {
      const state = { weights: 1, loops: [] as string[] };
      const scheduler = new Scheduler(fakeLoop(state, 2), [], async () => '');
      const before = scheduler.generate(request({ prompts: [[1], [2]] }));
      const update = scheduler.exclusive(async () => {
        state.weights = 2;
      });
      const after = scheduler.generate(request());
      const [old, , fresh] = await Promise.all([before, update, after]);
      expect(old.map((s) => s.tokens)).toEqual([
        [1, 10],
        [1, 11],
        [1, 12],
        [1, 13],
      ]);
      expect(old.map((s) => s.prompt)).toEqual([0, 0, 1, 1]);
      expect(fresh.map((s) => s.tokens[0])).toEqual([2, 2]);
      expect(Array.from(fresh[0].logprobs)).toEqual([3, 1]);
      expect(state.loops).toEqual(['base', 'base']);
    },
  );

  it(
    'lets requests for the same weights join a running loop, and starts another loop for another ' + 'adapter',
    async () => {
      const state = { weights: 1, loops: [] as string[] };
      const scheduler = new Scheduler(fakeLoop(state, 4), [], async () => '');
      // The next requests arrive as the first sample ends, while the loop still decodes the other two: no timing.
      let firstEnded!: () => void;
      const ended = new Promise<void>((resolve) => (firstEnded = resolve));
      const observer = { tokens: () => {}, finished: (j: number) => j === 0 && firstEnded() };
      const first = scheduler.generate(request({ n: 3, observer }));
      await ended;
      const joined = scheduler.generate(request());
      const adapted = scheduler.generate(request({ adapter: 'a' }));
      await Promise.all([first, joined, adapted]);
      expect(state.loops).toEqual(['base', 'a']);
      expect(scheduler.pendingSamples).toBe(0);
    },
  );

  it("asks each prompt's first sample to score its prompt in its prefill; a sample aborted while waiting leaves its prompt to the separate pass", async () => {
    const settled: string[] = [];
    const sink = (tag: string) => ({
      K: 2,
      options: (p: number) => ({ gather: [100 + p] }),
      // The first word on a prompt counts (PromptScoreSink): the scheduler also settles it as its sample ends.
      settle: (p: number, scores: Promise<PromptScores> | null) => {
        if (!settled.some((line) => line.startsWith(`${tag} prompt ${p}:`)))
          settled.push(`${tag} prompt ${p}: ${scores ? 'prefill' : 'separate pass'}`);
      },
    });
    const asked: string[] = [];
    const scheduler = new Scheduler(
      async (queue) => {
        for (;;) {
          await new Promise((resolve) => setTimeout(resolve, 1));
          const [s] = queue.take(1);
          if (!s) return;
          // The decode loop's prefill scores a sample that asks (continuous-batching.ts admit).
          if (s.scorePrompt) {
            asked.push(`${s.prompt[0]}: K ${s.scorePrompt.K}, gather ${s.scorePrompt.options.gather}`);
            s.scorePrompt.scored(Promise.resolve({} as PromptScores));
          }
          await s.progress.take([7, 7]);
          queue.finished(s, Float32Array.of(0, 0));
        }
      },
      [],
      async () => '',
    );
    const aborted = new AbortController();
    aborted.abort();
    await Promise.all([
      scheduler.generate(request({ prompts: [[1], [2]], scorePrompts: sink('first') })),
      scheduler.generate(request({ prompts: [[3]], scorePrompts: sink('aborted'), signal: aborted.signal })),
    ]);
    expect(asked).toEqual(['1: K 2, gather 100', '2: K 2, gather 101']);
    expect(settled.sort()).toEqual([
      'aborted prompt 0: separate pass',
      'first prompt 0: prefill',
      'first prompt 1: prefill',
    ]);
  });

  it('fails the requests of a loop that throws, and keeps serving', async () => {
    let fail = true;
    const state = { weights: 1, loops: [] as string[] };
    const loop = fakeLoop(state, 2);
    const scheduler = new Scheduler(
      async (queue, adapter) => {
        if (fail) {
          fail = false;
          queue.take(1);
          throw new Error('device lost');
        }
        return loop(queue, adapter);
      },
      [],
      async () => '',
    );
    await expect(scheduler.generate(request())).rejects.toThrow('device lost');
    expect((await scheduler.generate(request())).length).toBe(2);
  });
});
