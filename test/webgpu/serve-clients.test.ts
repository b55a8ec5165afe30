// `node serve.js` serving stories260K (a real Llama with its SentencePiece tokenizer), driven by the official `openai`
// client and by plain HTTP as curl would: completions and chat with and without streaming (include_usage, [DONE],
// log-probs per chunk), the text Hugging Face decodes for the same greedy tokens (its leading space kept), SGLang's
// streaming /generate, a client that aborts mid-stream and /abort_request (the sample leaves the batch, /metrics
// counts it), the routes clients and RL frameworks call, and requests refused before the work they would cost (a
// 20 MB prompt by its bytes before tokenizing, deep JSON before parsing, a body over the limit) with the server's
// memory back at its level.
import { it, expect, beforeAll, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { cp, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { startServeJs } from '../../tools/bench/serve-process.ts';
import { counterValue } from '../../ppo/serving/counters.ts';
import { describeWithFixtures, fixturePath, readFixtureJson } from '../support/fixtures.ts';

const MAX_PROMPT_TOKENS = 64;
/** More than the model's 512 positions allow: max_model_len says 512. */
const MAX_NEW_TOKENS = 2000;
/** A prompt whose greedy story runs 975 tokens before it ends: a request aborted early is still running. */
const LONG_STORY = 'Tom and Sue';
/** The start of the story stories260K tells greedily from <s> (fixtures.json, Hugging Face's generate). */
const PROMPT = 'Once upon a time, there was a little girl named Lily.';

/** expect.poll's default 1 s is shorter than a loaded machine may starve the server: the count is what is checked. */
const POLL = { timeout: 30_000 };

let server: ChildProcess;
let url = '';
let client: OpenAI;
let story = '';

async function post(path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  try {
    return { status: res.status, json: JSON.parse(text) };
  } catch {
    return { status: res.status, json: text };
  }
}

/** The events of a Server-Sent Events body: each `data:` line's JSON, and whether it ended with [DONE]. */
async function events(res: Response): Promise<{ events: any[]; done: boolean }> {
  const lines = (await res.text()).split('\n\n').filter((l) => l.startsWith('data: '));
  const data = lines.map((l) => l.slice('data: '.length));
  const done = data.at(-1) === '[DONE]';
  return { events: data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d)), done };
}

const metric = async (name: string) => counterValue(await (await fetch(`${url}/metrics`)).text(), name);

/** The server's resident memory, in bytes. */
async function rss(): Promise<number> {
  const status = await readFile(`/proc/${server.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Hugging Face's logits of stories260K after each prefix of 24 tokens (fixtures.json's logits_check). */
interface LogitsCheck {
  input_ids: number[];
  logits: number[];
  next_token_logprobs: number[];
}
const logitsCheck = (): LogitsCheck => readFixtureJson('hf/stories260K/fixtures.json').logits_check;
const VOCAB = 512;

/** Hugging Face's log-probs after input_ids[0..t] (float64), in rank order, and the rank of input_ids[t + 1]. */
function hfLogprobs(check: LogitsCheck, t: number) {
  const row = check.logits.slice(t * VOCAB, (t + 1) * VOCAB);
  const max = Math.max(...row);
  const log = Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0));
  const lps = row.map((x) => x - max - log);
  const order = lps.map((lp, id) => ({ id, lp })).sort((a, b) => b.lp - a.lp || a.id - b.id);
  return { lps, order, rank: 1 + lps.filter((lp) => lp > lps[check.input_ids[t + 1]]).length };
}

const close = (got: number, want: number, what: string) =>
  expect(Math.abs(got - want), `${what}: ${got} vs ${want}`).toBeLessThan(1e-4);

describeWithFixtures('node serve.js with real clients (stories260K)', ['hf/stories260K/tokenizer.json'], () => {
  beforeAll(async () => {
    story = readFixtureJson('hf/stories260K/fixtures.json').greedy_from_bos.text;
    // The checkpoint with a chat template (the fixture has none), so the chat routes have something to render.
    const dir = await mkdtemp(join(tmpdir(), 'serve-clients-'));
    await cp(fixturePath('hf/stories260K'), dir, { recursive: true });
    const config = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8'));
    config.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}";
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
    ({ url, child: server } = await startServeJs(dir, [
      '--served-model-name',
      'stories',
      '--max-prompt-tokens',
      String(MAX_PROMPT_TOKENS),
      '--max-new-tokens',
      String(MAX_NEW_TOKENS),
      '--max-slots',
      '2',
      // vLLM's flag: prompt_logprobs up to the whole vocabulary (-1).
      '--max-logprobs',
      '-1',
    ]));
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });

  afterAll(async () => {
    if (!server || server.exitCode !== null) return;
    const exited = new Promise((resolve) => server.on('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  });

  it("completions: Hugging Face's greedy text with its leading space, log-prob tokens that join to it", async () => {
    const c = await client.completions.create({
      model: 'stories',
      prompt: PROMPT,
      max_tokens: 12,
      temperature: 0,
      logprobs: 0,
    });
    const text = c.choices[0].text;
    expect(text.startsWith(' She')).toBe(true);
    expect(story.startsWith(PROMPT + text)).toBe(true);
    const lp = c.choices[0].logprobs!;
    expect(lp.tokens!.join('')).toBe(text);
    expect(lp.text_offset).toEqual(lp.tokens!.map((_, i) => lp.tokens!.slice(0, i).join('').length));
    expect(lp.token_logprobs!.every((x) => x <= 0)).toBe(true);
    expect(c.usage).toMatchObject({ completion_tokens: 12 });
  });

  it("top-N log-probs (completions logprobs: 5, chat top_logprobs, SGLang top_logprobs_num) are Hugging Face's", async () => {
    const check: { input_ids: number[]; logits: number[] } =
      readFixtureJson('hf/stories260K/fixtures.json').logits_check;
    const V = 512;
    /** Hugging Face's top 5 (token, log-prob) after input_ids[0..t]. */
    const hfTop = (t: number) => {
      const row = check.logits.slice(t * V, (t + 1) * V);
      const max = Math.max(...row);
      const log = Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0));
      return row
        .map((x, id) => ({ id, lp: x - max - log }))
        .sort((a, b) => b.lp - a.lp)
        .slice(0, 5);
    };
    const P = 12;
    const prompt = check.input_ids.slice(0, P);
    const c = await client.completions.create({
      model: 'stories',
      prompt,
      max_tokens: 4,
      temperature: 0,
      logprobs: 5,
      // @ts-expect-error vLLM's extension: the token ids of the completion
      return_token_ids: true,
    });
    const choice = c.choices[0] as (typeof c.choices)[0] & { token_ids: number[] };
    expect(choice.token_ids).toEqual(check.input_ids.slice(P, P + 4));
    const g = await post('/generate', {
      input_ids: prompt,
      return_logprob: true,
      top_logprobs_num: 5,
      sampling_params: { temperature: 0, max_new_tokens: 4 },
    });
    choice.logprobs!.top_logprobs!.forEach((dict, t) => {
      const want = hfTop(P - 1 + t);
      const got = Object.values(dict);
      expect(got).toHaveLength(5);
      got.forEach((lp, k) => expect(Math.abs(lp - want[k].lp), `token ${t} alternative ${k}`).toBeLessThan(1e-4));
      // The greedy token is the first alternative, with its own log-prob.
      expect(Object.keys(dict)[0]).toBe(choice.logprobs!.tokens![t]);
      const sglang = g.json.meta_info.output_top_logprobs[t] as [number, number, null][];
      expect(sglang.map(([, id]) => id)).toEqual(want.map((w) => w.id));
    });
    const chat = await client.chat.completions.create({
      model: 'stories',
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 3,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    for (const token of chat.choices[0].logprobs!.content!) {
      expect(token.top_logprobs).toHaveLength(3);
      expect(token.top_logprobs[0]).toMatchObject({ token: token.token, logprob: token.logprob });
      expect(token.top_logprobs[0].bytes).toEqual(Array.from(new TextEncoder().encode(token.token)));
    }
    const stream = await client.completions.create({
      model: 'stories',
      prompt,
      max_tokens: 4,
      temperature: 0,
      logprobs: 2,
      stream: true,
    });
    const streamed = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.top_logprobs ?? []));
    expect(streamed.map((d) => Object.values(d))).toEqual(
      choice.logprobs!.top_logprobs!.map((d) => Object.values(d).slice(0, 2)),
    );
    expect((await post('/v1/completions', { prompt, logprobs: 21 })).status).toBe(400);
  });

  it("prompt log-probs (echo with max_tokens 0, prompt_logprobs, SGLang's logprob_start_len) are Hugging Face's", async () => {
    const check = logitsCheck();
    const ids = check.input_ids;
    const hf = (t: number) => hfLogprobs(check, t);
    // lm-evaluation-harness's log-likelihood request: echo, max_tokens 0, logprobs 1, through the openai client.
    const scored = await client.completions.create({
      model: 'stories',
      prompt: ids,
      echo: true,
      max_tokens: 0,
      logprobs: 2,
    });
    const lp = scored.choices[0].logprobs!;
    expect(scored.choices[0].finish_reason).toBe('length');
    expect(scored.usage).toMatchObject({ prompt_tokens: ids.length, completion_tokens: 0 });
    expect(lp.tokens).toHaveLength(ids.length);
    expect(lp.tokens!.join('')).toBe(scored.choices[0].text);
    expect(scored.choices[0].text.startsWith('Once upon a time')).toBe(true);
    expect(lp.text_offset).toEqual(lp.tokens!.map((_, i) => lp.tokens!.slice(0, i).join('').length));
    expect(lp.token_logprobs![0]).toBeNull();
    expect(lp.top_logprobs![0]).toBeNull();
    check.next_token_logprobs.forEach((want, t) => {
      close(lp.token_logprobs![t + 1]!, want, `token ${t + 1}`);
      // The two most likely tokens there, and the prompt's own token.
      const dict = lp.top_logprobs![t + 1]!;
      for (const { lp: alt } of hf(t).order.slice(0, 2))
        expect(Object.values(dict).some((x) => Math.abs(x - alt) < 1e-4)).toBe(true);
      expect(dict[lp.tokens![t + 1]]).toBeCloseTo(want, 4);
    });
    // vLLM's prompt_logprobs beside a generation: null first, then {id: {logprob, rank, decoded_token}}.
    const withPrompt = await post('/v1/completions', {
      prompt: ids.slice(0, 12),
      max_tokens: 4,
      temperature: 0,
      prompt_logprobs: 3,
      return_token_ids: true,
    });
    const choice = withPrompt.json.choices[0];
    expect(choice.token_ids).toEqual(ids.slice(12, 16));
    expect(choice.prompt_logprobs).toHaveLength(12);
    expect(choice.prompt_logprobs[0]).toBeNull();
    for (let p = 1; p < 12; p++) {
      const entry = choice.prompt_logprobs[p];
      const { order, rank } = hf(p - 1);
      close(entry[ids[p]].logprob, check.next_token_logprobs[p - 1], `prompt_logprobs[${p}]`);
      expect(entry[ids[p]].rank).toBe(rank);
      expect(typeof entry[ids[p]].decoded_token).toBe('string');
      order.slice(0, 3).forEach((alt, k) => {
        expect(entry[alt.id].rank).toBe(k + 1);
        close(entry[alt.id].logprob, alt.lp, `prompt_logprobs[${p}] alternative ${k}`);
      });
    }
    // Chat: vLLM's top-level prompt_logprobs, those of the rendered prompt (here <s> + the text, as completions').
    const [chatScored, textScored] = await Promise.all([
      post('/v1/chat/completions', {
        messages: [{ role: 'user', content: PROMPT }],
        max_tokens: 1,
        prompt_logprobs: 1,
      }),
      post('/v1/completions', { prompt: PROMPT, max_tokens: 1, prompt_logprobs: 1 }),
    ]);
    expect(chatScored.json.prompt_logprobs.length).toBeGreaterThan(5);
    expect(chatScored.json.prompt_logprobs).toEqual(textScored.json.choices[0].prompt_logprobs);
    // Echo with a generation: the prompt, then the same greedy completion the request gets without echo.
    const plain = await post('/v1/completions', { prompt: PROMPT, max_tokens: 6, temperature: 0, logprobs: 0 });
    const echoed = await post('/v1/completions', {
      prompt: PROMPT,
      max_tokens: 6,
      temperature: 0,
      logprobs: 0,
      echo: true,
    });
    const e = echoed.json.choices[0];
    expect(e.text).toBe(PROMPT + plain.json.choices[0].text);
    expect(e.logprobs.token_logprobs.slice(-6)).toEqual(plain.json.choices[0].logprobs.token_logprobs);
    expect(e.logprobs.tokens.join('')).toBe(e.text);
    expect(e.logprobs.text_offset.at(-6)).toBe(PROMPT.length);
    // Streamed, the prompt comes first and the chunks join to the same text.
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: PROMPT, max_tokens: 6, temperature: 0, logprobs: 0, echo: true, stream: true }),
    });
    const streamed = (await events(res)).events;
    expect(streamed[0].choices[0].text).toBe(PROMPT);
    expect(streamed.map((c) => c.choices[0].text).join('')).toBe(e.text);
    expect(streamed.flatMap((c) => c.choices[0].logprobs.text_offset)).toEqual(e.logprobs.text_offset);
    // SGLang: input_token_logprobs from logprob_start_len, the first entry's log-prob null (as SGLang), and the
    // input's alternatives with top_logprobs_num.
    const g = await post('/generate', {
      input_ids: ids,
      return_logprob: true,
      logprob_start_len: 5,
      top_logprobs_num: 2,
      sampling_params: { temperature: 0, max_new_tokens: 0 },
    });
    expect(g.status).toBe(200);
    const input = g.json.meta_info.input_token_logprobs as [number | null, number, null][];
    expect(input.map(([, id]) => id)).toEqual(ids.slice(5));
    expect(input[0][0]).toBeNull();
    input.slice(1).forEach(([x], i) => close(x!, check.next_token_logprobs[5 + i], `input_token_logprobs[${i + 1}]`));
    const inputTop = g.json.meta_info.input_top_logprobs as ([number, number, null][] | null)[];
    expect(inputTop[0]).toBeNull();
    expect(inputTop[1]!.map(([, id]) => id)).toEqual(
      hf(5)
        .order.slice(0, 2)
        .map((a) => a.id),
    );
    expect(g.json.output_ids).toEqual([]);
    // The default (-1): the last prompt token only, null; no prompt scored.
    const last = await post('/generate', {
      input_ids: ids,
      return_logprob: true,
      sampling_params: { max_new_tokens: 1 },
    });
    expect(last.json.meta_info.input_token_logprobs).toEqual([[null, ids.at(-1), null]]);
    // Refusals: max_tokens 0 without prompt log-probs, a start past the prompt, prompt_logprobs with stream.
    expect((await post('/v1/completions', { prompt: ids, max_tokens: 0 })).json.error.param).toBe('max_tokens');
    const past = await post('/generate', { input_ids: ids, return_logprob: true, logprob_start_len: ids.length });
    expect(past.json.error.message).toContain('logprob_start_len');
    const streamed400 = await post('/v1/completions', { prompt: ids, prompt_logprobs: 1, stream: true });
    expect(streamed400.status).toBe(400);
  });

  it("vLLM's prompt_logprobs -1 (the whole vocabulary) and SGLang's token_ids_logprob are Hugging Face's", async () => {
    const check = logitsCheck();
    const ids = check.input_ids;
    // -1: every token of the vocabulary at each position, with its log-prob and rank (this server: --max-logprobs -1).
    const whole = await post('/v1/completions', { prompt: ids.slice(0, 8), max_tokens: 0, prompt_logprobs: -1 });
    expect(whole.status).toBe(200);
    const entries = whole.json.choices[0].prompt_logprobs as (Record<
      string,
      { logprob: number; rank: number }
    > | null)[];
    expect(entries).toHaveLength(8);
    expect(entries[0]).toBeNull();
    for (let p = 1; p < 8; p++) {
      const { lps, order } = hfLogprobs(check, p - 1);
      const entry = entries[p]!;
      expect(Object.keys(entry)).toHaveLength(VOCAB);
      lps.forEach((lp, id) => close(entry[id].logprob, lp, `prompt_logprobs[${p}][${id}]`));
      // Ranks 1 … V in Hugging Face's order, up to near-ties of float32 logits (a token at rank r has the r-th
      // largest log-prob). The prompt token's own entry, also an alternative, keeps its alternative's rank (vLLM
      // writes the alternatives after it).
      const ranks = Object.values(entry).map((e) => e.rank);
      expect(new Set(ranks).size).toBe(VOCAB);
      expect(Math.max(...ranks)).toBe(VOCAB);
      lps.forEach((lp, id) => close(order[entry[id].rank - 1].lp, lp, `rank of ${id} at ${p}`));
    }
    // Above 20 alternatives the host ranks every token: 30 of them, Hugging Face's first 30.
    const thirty = await post('/v1/completions', { prompt: ids.slice(0, 4), max_tokens: 0, prompt_logprobs: 30 });
    const entry = thirty.json.choices[0].prompt_logprobs[3];
    for (const { id, lp } of hfLogprobs(check, 2).order.slice(0, 30)) close(entry[id].logprob, lp, `alternative ${id}`);
    // vLLM's refusals: more than --max-logprobs (here the vocabulary), and -1 for a generated token's alternatives.
    const tooMany = await post('/v1/completions', { prompt: ids.slice(0, 4), max_tokens: 0, prompt_logprobs: 513 });
    expect(tooMany.json.error.message).toBe('Requested prompt logprobs of 513, which is greater than max allowed: 512');
    const chatAll = await post('/v1/chat/completions', {
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 1,
      logprobs: true,
      top_logprobs: -1,
    });
    expect(chatAll.status).toBe(400);
    expect(chatAll.json.error.param).toBe('top_logprobs');
    // SGLang's token_ids_logprob: the log-probs of the given tokens at every prompt position from logprob_start_len
    // (the first null, as SGLang) and at every generated token. Greedy, the first generated token's are Hugging
    // Face's after the whole prompt.
    const asked = [ids[5], 0, 401, 2];
    const g = await post('/generate', {
      input_ids: ids,
      return_logprob: true,
      logprob_start_len: 3,
      token_ids_logprob: asked,
      sampling_params: { temperature: 0, max_new_tokens: 5 },
    });
    expect(g.status).toBe(200);
    const input = g.json.meta_info.input_token_ids_logprobs as ([number, number, null][] | null)[];
    expect(input).toHaveLength(ids.length - 3);
    expect(input[0]).toBeNull();
    input.slice(1).forEach((row, i) => {
      expect(row!.map(([, id]) => id)).toEqual(asked);
      const { lps } = hfLogprobs(check, 3 + i);
      row!.forEach(([lp, id]) => close(lp, lps[id], `input_token_ids_logprobs[${i + 1}][${id}]`));
    });
    const output = g.json.meta_info.output_token_ids_logprobs as [number, number, null][][];
    expect(output).toHaveLength(5);
    output[0].forEach(([lp, id]) => close(lp, hfLogprobs(check, ids.length - 1).lps[id], `output[0][${id}]`));
    // At every generated token, asked for the sampled tokens themselves: their log-probs are the sampler's own, at
    // temperature 1 (greedy) and at 0.7 (log_softmax(logits / 0.7)), for the same seed's samples.
    for (const temperature of [0, 0.7]) {
      const body = { input_ids: ids, return_logprob: true, sampling_params: { temperature, max_new_tokens: 6 } };
      const sampled = await post('/generate', { ...body, sampling_params: { ...body.sampling_params, seed: 3 } });
      const tokens = sampled.json.output_ids as number[];
      const again = await post('/generate', {
        ...body,
        token_ids_logprob: tokens,
        sampling_params: { ...body.sampling_params, seed: 3 },
      });
      expect(again.json.output_ids).toEqual(tokens);
      const own = (again.json.meta_info.output_token_logprobs as [number][]).map(([lp]) => lp);
      const gathered = again.json.meta_info.output_token_ids_logprobs as [number, number, null][][];
      tokens.forEach((id, t) => {
        expect(gathered[t].map(([, asked]) => asked)).toEqual(tokens);
        expect(gathered[t][t][1]).toBe(id);
        close(gathered[t][t][0], own[t], `temperature ${temperature}, token ${t}`);
      });
      // No prompt positions were asked for (logprob_start_len -1): SGLang's single null.
      expect(again.json.meta_info.input_token_ids_logprobs).toEqual([null]);
    }
    // Token ids outside the vocabulary, and with a stream, are 400s.
    const outside = await post('/generate', { input_ids: ids, return_logprob: true, token_ids_logprob: [512] });
    expect(outside.json.error.param).toBe('token_ids_logprob');
  });

  it('logits processing per request: ignore_eos, min_tokens, logit_bias, penalties, repetition, beside neutral rows', async () => {
    const greedy = { text: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 400 } };
    const plain = await post('/generate', greedy);
    // The story ends with EOS (id 1) at 331 tokens; ignore_eos runs it to the budget, min_tokens past 331.
    expect(plain.json.meta_info.finish_reason).toEqual({ type: 'stop', matched: 1 });
    const ends = plain.json.output_ids.length;
    const [ignored, atLeast, biased, penalised, again] = await Promise.all([
      post('/generate', { ...greedy, sampling_params: { ...greedy.sampling_params, ignore_eos: true } }),
      post('/generate', { ...greedy, sampling_params: { ...greedy.sampling_params, min_new_tokens: ends + 5 } }),
      post('/v1/completions', {
        prompt: PROMPT,
        max_tokens: 6,
        temperature: 0,
        logit_bias: { 403: 100 },
        return_token_ids: true,
      }),
      post('/v1/completions', {
        prompt: PROMPT,
        max_tokens: 40,
        temperature: 0,
        presence_penalty: 2,
        return_token_ids: true,
      }),
      post('/generate', greedy),
    ]);
    expect(ignored.json.meta_info.finish_reason).toEqual({ type: 'length', length: 400 });
    expect(ignored.json.output_ids.slice(0, ends - 1)).toEqual(plain.json.output_ids.slice(0, ends - 1));
    expect(atLeast.json.output_ids.length).toBeGreaterThanOrEqual(ends + 5);
    expect(biased.json.choices[0].token_ids).toEqual(new Array(6).fill(403));
    const penalisedIds: number[] = penalised.json.choices[0].token_ids;
    expect(penalisedIds).not.toEqual(plain.json.output_ids.slice(0, 40));
    // Rows without processing in the same batch are untouched: the same greedy story.
    expect(again.json.output_ids).toEqual(plain.json.output_ids);
    expect((await post('/v1/completions', { prompt: PROMPT, logit_bias: { 512: 1 } })).status).toBe(400);
    // repetition_penalty over the prompt (vLLM's): after these 8 tokens Hugging Face's greedy token (261) is one of
    // the prompt's; penalised by 2 (positive logits halved, negative doubled) the argmax is 399, and the reported
    // log-prob is that processed distribution's (vLLM's processed log-probs).
    const check: { input_ids: number[]; logits: number[] } =
      readFixtureJson('hf/stories260K/fixtures.json').logits_check;
    const prompt = check.input_ids.slice(0, 8);
    const inPrompt = new Set(prompt);
    const processed = check.logits
      .slice(7 * 512, 8 * 512)
      .map((x, id) => (inPrompt.has(id) ? (x > 0 ? x / 2 : x * 2) : x));
    const max = Math.max(...processed);
    const logNormalizer = Math.log(processed.reduce((a, x) => a + Math.exp(x - max), 0));
    const [repeated, unpenalised] = await Promise.all([
      post('/generate', {
        input_ids: prompt,
        return_logprob: true,
        sampling_params: { temperature: 0, max_new_tokens: 1, repetition_penalty: 2 },
      }),
      post('/generate', { input_ids: prompt, sampling_params: { temperature: 0, max_new_tokens: 1 } }),
    ]);
    expect(unpenalised.json.output_ids).toEqual([261]);
    expect(repeated.json.output_ids).toEqual([processed.indexOf(max)]);
    expect(processed.indexOf(max)).toBe(399);
    const [[lp]] = repeated.json.meta_info.output_token_logprobs;
    expect(Math.abs(lp - (processed[399] - max - logNormalizer))).toBeLessThan(1e-4);
  });

  it('completions stream: chunks that join to the same text, finish_reason last, usage, then [DONE]', async () => {
    const body = { model: 'stories', prompt: PROMPT, max_tokens: 20, temperature: 0 };
    const whole = await client.completions.create(body);
    const stream = await client.completions.create({
      ...body,
      stream: true,
      stream_options: { include_usage: true },
      logprobs: 0,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ completion_tokens: 20, total_tokens: 20 + usage.usage!.prompt_tokens });
    const choices = chunks.slice(0, -1).map((c) => c.choices[0]);
    expect(choices.length).toBeGreaterThan(1);
    expect(choices.map((c) => c.text).join('')).toBe(whole.choices[0].text);
    expect(choices.at(-1)!.finish_reason).toBe('length');
    expect(choices.slice(0, -1).every((c) => c.finish_reason === null)).toBe(true);
    expect(choices.flatMap((c) => c.logprobs?.token_logprobs ?? [])).toHaveLength(20);
    // The wire format as curl sees it: data lines, the last one [DONE].
    const raw = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, stream: true }),
    });
    expect(raw.headers.get('content-type')).toContain('text/event-stream');
    expect((await events(raw)).done).toBe(true);
  });

  it('chat: the stream joins to the answer, role first; response_format text and tools [] are accepted; echo', async () => {
    const messages = [{ role: 'user' as const, content: PROMPT }];
    const body = { model: 'stories', messages, max_tokens: 16, temperature: 0 };
    const whole = await client.chat.completions.create({ ...body, response_format: { type: 'text' }, tools: [] });
    expect(story.startsWith(PROMPT + whole.choices[0].message.content)).toBe(true);
    const stream = await client.chat.completions.create({
      ...body,
      stream: true,
      stream_options: { include_usage: true },
      logprobs: true,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(content).toBe(whole.choices[0].message.content);
    expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: 16 });
    expect(
      chunks
        .flatMap((c) => c.choices[0]?.logprobs?.content ?? [])
        .map((t) => t.token)
        .join(''),
    ).toBe(content);
    // The SDK's helper assembles the same message from the stream.
    const final = await client.chat.completions.stream(body).finalChatCompletion();
    expect(final.choices[0].message.content).toBe(whole.choices[0].message.content);
    // vLLM's echo: without a generation prompt the reply continues the last message, which its content starts with,
    // also as the stream's first content.
    const cont = {
      messages: [...messages, { role: 'assistant', content: 'Once' }],
      max_tokens: 8,
      temperature: 0,
      add_generation_prompt: false,
    };
    const plain = (await post('/v1/chat/completions', cont)).json.choices[0].message.content;
    const echoed = (await post('/v1/chat/completions', { ...cont, echo: true })).json.choices[0].message.content;
    expect(echoed).toBe(`Once${plain}`);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...cont, echo: true, stream: true }),
    });
    const got = (await events(res)).events;
    expect(got[1].choices[0]).toMatchObject({ delta: { content: 'Once' }, logprobs: null });
    expect(got.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(echoed);
    // With a generation prompt the last message is the user's, not the reply's role: nothing is echoed.
    const asked = await post('/v1/chat/completions', { ...body, echo: true });
    expect(asked.json.choices[0].message.content).toBe(whole.choices[0].message.content);
  });

  it("SGLang's streaming /generate: each sample's text and output_ids so far, the last with finish_reason", async () => {
    const body = { text: PROMPT, sampling_params: { temperature: 0, max_new_tokens: 20 } };
    const whole = await post('/generate', body);
    const res = await fetch(`${url}/generate`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
    const { events: got, done } = await events(res);
    expect(done).toBe(true);
    const last = got.at(-1);
    expect(last.output_ids).toEqual(whole.json.output_ids);
    expect(last.text).toBe(whole.json.text);
    expect(last.meta_info.finish_reason).toEqual({ type: 'length', length: 20 });
    expect(got.slice(0, -1).every((e) => e.meta_info.finish_reason === null && last.text.startsWith(e.text))).toBe(
      true,
    );
  });

  it('a client that goes away mid-stream leaves the batch at once: /metrics counts it, the next request is served', async () => {
    const aborted = await metric('aborted_requests_total');
    const steps = await metric('decode_steps_total');
    const controller = new AbortController();
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: LONG_STORY, max_tokens: MAX_NEW_TOKENS, temperature: 0, stream: true }),
      signal: controller.signal,
    });
    await res.body!.getReader().read();
    controller.abort();
    await expect.poll(() => metric('aborted_requests_total'), POLL).toBe(aborted + 1);
    const after = await client.completions.create({ model: 'stories', prompt: PROMPT, max_tokens: 4, temperature: 0 });
    expect(after.choices[0].text.length).toBeGreaterThan(0);
    // Its sample stopped decoding long before its story's end (975 tokens).
    expect((await metric('decode_steps_total')) - steps).toBeLessThan(600);
  });

  it("the openai client's abort mid-stream: the server counts it and keeps serving", async () => {
    const aborted = await metric('aborted_requests_total');
    const controller = new AbortController();
    const stream = await client.completions.create(
      { model: 'stories', prompt: LONG_STORY, max_tokens: MAX_NEW_TOKENS, temperature: 0, stream: true },
      { signal: controller.signal },
    );
    try {
      for await (const _ of stream) controller.abort();
    } catch (err) {
      // The SDK ends the iteration, or throws its abort error, depending on where the abort finds it.
      expect((err as Error).name).toMatch(/Abort/);
    }
    await expect.poll(() => metric('aborted_requests_total'), POLL).toBe(aborted + 1);
    const after = await client.completions.create({ model: 'stories', prompt: PROMPT, max_tokens: 4, temperature: 0 });
    expect(after.choices[0].text.length).toBeGreaterThan(0);
  });

  it('/abort_request ends a /generate by rid: its stream ends with finish_reason abort', async () => {
    const aborted = await metric('aborted_requests_total');
    const res = await fetch(`${url}/generate`, {
      method: 'POST',
      body: JSON.stringify({
        text: LONG_STORY,
        rid: 'story-1',
        stream: true,
        sampling_params: { temperature: 0, max_new_tokens: MAX_NEW_TOKENS },
      }),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('\n\n')) text += decoder.decode((await reader.read()).value);
    expect((await post('/abort_request', { rid: 'story-1' })).status).toBe(200);
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value);
    const last = JSON.parse(
      text
        .split('\n\n')
        .filter((l) => l.startsWith('data: {'))
        .at(-1)!
        .slice(6),
    );
    expect(last.meta_info.finish_reason.type).toBe('abort');
    expect(last.output_ids.length).toBeLessThan(975);
    expect(await metric('aborted_requests_total')).toBe(aborted + 1);
  });

  it('routes: tokenize and detokenize (both spellings), a model by id, flush_cache, version, ping, server info', async () => {
    const tokenized = await post('/tokenize', { prompt: PROMPT });
    expect(tokenized.json).toMatchObject({ count: tokenized.json.tokens.length, max_model_len: 512 });
    expect(tokenized.json.tokens[0]).toBe(1);
    const back = await post('/v1/detokenize', { tokens: tokenized.json.tokens, skip_special_tokens: true });
    expect(back.json).toEqual({ prompt: PROMPT, text: PROMPT });
    expect((await post('/v1/tokenize', { prompt: PROMPT, add_special_tokens: false })).json.tokens).toEqual(
      tokenized.json.tokens.slice(1),
    );
    const model = await client.models.retrieve('stories');
    // The server's prompt and budget would allow 64 + 2000 tokens; the model's context is 512 positions.
    expect(model).toMatchObject({ id: 'stories', max_model_len: 512 });
    expect((await fetch(`${url}/v1/models/other`)).status).toBe(404);
    expect((await post('/flush_cache', {})).status).toBe(200);
    expect((await fetch(`${url}/ping`)).status).toBe(200);
    expect((await (await fetch(`${url}/version`)).json()).version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await (await fetch(`${url}/get_server_info`)).json()).toMatchObject({
      served_model_name: 'stories',
      context_length: 512,
      max_running_requests: 2,
    });
  });

  it('refuses a 20 MB prompt by its bytes before tokenizing, five times, with memory back at its level; deep JSON 400, 65 MB 413', async () => {
    const before = await rss();
    const huge = 'Lily '.repeat(4_000_000);
    for (let i = 0; i < 5; i++) {
      const r = await post('/v1/completions', { prompt: huge, max_tokens: 1 });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toContain('bytes of text');
    }
    // Refused by its byte count, before any tokenizing (what makes the refusal fast; its speed is not timed here).
    const tokenize = await post('/tokenize', { prompt: huge });
    expect(tokenize.status).toBe(400);
    expect(tokenize.json.error.message).toContain('bytes of text');
    // The body itself (20 MB) is read and parsed each time; nothing is tokenized or kept.
    expect(await rss()).toBeLessThan(before + 300 * 2 ** 20);
    const deep = await post('/v1/completions', `${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    expect(deep.status).toBe(400);
    expect(deep.json.error.message).toContain('nests');
    expect((await post('/generate', 'x'.repeat(65 * 2 ** 20))).status).toBe(413);
    expect((await post('/v1/completions', { prompt: PROMPT, max_tokens: 2 })).status).toBe(200);
  });
});
