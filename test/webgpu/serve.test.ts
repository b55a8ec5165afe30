// `node serve.js` on a loopback port with a tiny model: SGLang's /generate and OpenAI's routes give the tokens and old
// log-probs of the in-process rollout for the same seed (a batch split over two requests too, and requests decoding
// together; the batch decodes only the rows that hold samples), bad requests get their 400/404 bodies while the server
// keeps serving, a weight update changes the log-probs and a mismatched or non-finite checkpoint is refused with the
// old weights still served, and a LoRA adapter loads and unloads by name.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { makeTinyRun } from '../support/tiny-run.ts';
import { seededRandom } from '../support/arrays.ts';
import { startServeJs } from '../../tools/bench/serve-process.ts';
import { counterValue } from '../../ppo/serving/counters.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { loadModel, saveModel } from '../../models/model-files-node.ts';
import { readGenerationConfig } from '../../models/checkpoint-io-node.ts';
import { loadTokenizer } from '../../models/tokenizer-node.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, loraValuesFromPeft, peftTensors, resolveTargetModules } from '../../models/lora.ts';
import { saveLoraAdapter } from '../../models/lora-files-node.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import { endTokenIds, type RolloutBatch } from '../../ppo/generation/types.ts';

const MAX_NEW_TOKENS = 8;
/** The tiny model's vocabulary (the arithmetic task's characters). */
const VOCAB = 20;
const LAYOUT = { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 };

let server: ChildProcess;
let url = '';
const dirs = { base: '', other: '', wider: '', nonFinite: '', adapter: '' };

async function post(path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** A checkpoint of the tiny network with other weights (or another width), with the base model's tokenizer. */
async function saveVariant(dir: string, seed: number, hidden = LAYOUT.hidden): Promise<void> {
  const engine = await gpuEngine();
  const config = tinyQwen3Config(VOCAB, { ...LAYOUT, hidden });
  const params = createParameterArena(engine, config, 'variant');
  uploadArenaTensors(engine, params, initialParameters(config, seed));
  await saveModel(engine, dir, config, params);
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) await cp(join(dirs.base, f), join(dir, f));
}

/** The base checkpoint with its last weight set to NaN (saveModel refuses to write one). */
async function saveNonFinite(dir: string): Promise<void> {
  await cp(dirs.base, dir, { recursive: true });
  const file = join(dir, 'model.safetensors');
  const bytes = await readFile(file);
  const header = JSON.parse(bytes.subarray(8, 8 + Number(bytes.readBigUInt64LE(0))).toString('utf8'));
  expect(Object.values(header).some((t: any) => t.dtype === 'F32')).toBe(true);
  bytes.writeFloatLE(Number.NaN, bytes.length - 4);
  await writeFile(file, bytes);
}

/** A PEFT adapter of the base model with random (non-zero) B, so it changes the model's outputs. */
async function saveAdapter(dir: string): Promise<void> {
  const engine = await gpuEngine();
  const config = tinyQwen3Config(VOCAB, LAYOUT);
  const settings = {
    rank: 2,
    alpha: 4,
    targetModules: resolveTargetModules(['all-linear'], null, 'target_modules'),
    useRslora: false,
  };
  const peft = peftTensors(config, settings, initialLoraValues(config, settings, 5));
  const random = seededRandom(6);
  for (const [name, t] of peft)
    if (name.endsWith('.lora_B.weight')) t.data.forEach((_, i, b) => (b[i] = random() - 0.5));
  const adapters = new LoraAdapters(
    engine,
    config,
    settings,
    loraValuesFromPeft(config, settings, (n) => peft.get(n), 'test'),
    'served-test',
  );
  await saveLoraAdapter(dir, adapters, null);
  adapters.destroy();
}

/** The in-process rollout of the base model, as the trainer runs it. */
async function localRollout(
  prompts: number[][],
  c: { n: number; temperature: number; topK: number; topP: number; seed: number },
): Promise<RolloutBatch> {
  const engine = await gpuEngine();
  const model = await loadModel(engine, dirs.base);
  const end = endTokenIds(model.config, await readGenerationConfig(dirs.base), await loadTokenizer(dirs.base));
  const batch = await new RolloutGenerator(engine, { config: model.config, params: model.params }).generate(prompts, {
    ...c,
    ...end,
    maxResponseLength: MAX_NEW_TOKENS,
  });
  for (const b of model.params.buffers) engine.destroyTensor(b);
  return batch;
}

/** /generate's samples as (tokens, log-probs). */
const samplesOf = (json: any) =>
  (Array.isArray(json) ? json : [json]).map((o: any) => ({
    tokens: o.output_ids as number[],
    logprobs: (o.meta_info.output_token_logprobs as [number, number, null][]).map(([lp]) => lp),
  }));

function expectSameSamples(got: { tokens: number[]; logprobs: number[] }[], batch: RolloutBatch, first = 0): void {
  got.forEach((s, k) => {
    const i = first + k;
    expect(s.tokens, `sample ${i}`).toEqual(batch.responses[i].slice(0, batch.responseLengths[i]));
    s.logprobs.forEach((lp, t) =>
      expect(Math.abs(lp - batch.oldLogProbs[i][t]), `sample ${i} token ${t}`).toBeLessThan(1e-5),
    );
  });
}

describe('node serve.js', () => {
  beforeAll(async () => {
    const run = await makeTinyRun(2);
    dirs.base = join(run.root, 'model');
    for (const key of ['other', 'wider', 'nonFinite', 'adapter'] as const) dirs[key] = join(run.root, key);
    await saveVariant(dirs.other, 6);
    await saveVariant(dirs.wider, 6, 48);
    await saveNonFinite(dirs.nonFinite);
    await mkdir(dirs.adapter);
    await saveAdapter(dirs.adapter);
    ({ url, child: server } = await startServeJs(dirs.base, [
      '--max-prompt-tokens',
      '16',
      '--max-new-tokens',
      String(MAX_NEW_TOKENS),
      '--max-slots',
      '4',
    ]));
  });

  afterAll(async () => {
    if (!server || server.exitCode !== null) return;
    const exited = new Promise((resolve) => server.on('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  });

  it(
    "/generate gives the in-process rollout's tokens and old log-probs for the same seed, also split over two " +
      'concurrent requests',
    async () => {
      const prompts = [
        [1, 5, 13, 6],
        [9, 14, 7],
      ];
      const sampling = { n: 2, temperature: 0.9, topK: 12, topP: 0.95, seed: 11 };
      const local = await localRollout(prompts, sampling);
      const params = {
        temperature: 0.9,
        top_k: 12,
        top_p: 0.95,
        n: 2,
        sampling_seed: 11,
        max_new_tokens: MAX_NEW_TOKENS,
      };
      const whole = await post('/generate', { input_ids: prompts, sampling_params: params, return_logprob: true });
      expect(whole.status).toBe(200);
      expectSameSamples(samplesOf(whole.json), local);
      const [first, second] = await Promise.all([
        post('/generate', { input_ids: prompts[0], sampling_params: params, return_logprob: true }),
        post('/generate', {
          input_ids: prompts[1],
          sampling_params: { ...params, sample_offset: 2 },
          return_logprob: true,
        }),
      ]);
      expectSameSamples(samplesOf(first.json), local, 0);
      expectSameSamples(samplesOf(second.json), local, 2);
      expect(first.json[0].meta_info).toMatchObject({
        prompt_tokens: 4,
        completion_tokens: first.json[0].output_ids.length,
        weight_version: 'default',
      });
    },
  );

  it('requests with different sampling decode together and each gets what it gets alone', async () => {
    const bodies = [
      { prompt: [4, 6, 13], max_tokens: MAX_NEW_TOKENS, temperature: 0, return_token_ids: true, logprobs: 0 },
      {
        prompt: [4, 6, 13],
        max_tokens: 5,
        temperature: 0.7,
        top_k: 5,
        seed: 1,
        n: 3,
        return_token_ids: true,
        logprobs: 0,
      },
      {
        prompt: [8, 13],
        max_tokens: MAX_NEW_TOKENS,
        temperature: 1.3,
        top_p: 0.8,
        seed: 2,
        return_token_ids: true,
        logprobs: 0,
      },
    ];
    const alone: any[] = [];
    for (const body of bodies) alone.push((await post('/v1/completions', body)).json);
    const together = (await Promise.all(bodies.map((body) => post('/v1/completions', body)))).map((r) => r.json);
    const view = (json: any) =>
      json.choices.map((c: any) => ({
        tokens: c.token_ids,
        logprobs: c.logprobs.token_logprobs,
        finish: c.finish_reason,
      }));
    together.forEach((json, i) => expect(view(json)).toEqual(view(alone[i])));
    expect(together[1].choices).toHaveLength(3);
    for (const c of together[1].choices) expect(c.token_ids.length).toBeLessThanOrEqual(5);
  });

  it(
    'decodes only the rows that hold samples: one sample on 4 slots costs one row per decode step ' + '(/metrics)',
    async () => {
      const decoded = async () => {
        const text = await (await fetch(`${url}/metrics`)).text();
        return {
          steps: counterValue(text, 'decode_steps_total'),
          rowSteps: counterValue(text, 'decode_row_steps_total'),
        };
      };
      const before = await decoded();
      const one = await post('/generate', {
        input_ids: [1, 5, 13, 6],
        sampling_params: { temperature: 0, max_new_tokens: MAX_NEW_TOKENS },
      });
      expect(one.status).toBe(200);
      const after = await decoded();
      // The prompt's logits give the first token, each decode step one more; the host reads every 8 steps, so the
      // loop decodes to the budget even when the sample ended sooner.
      expect(after.steps - before.steps).toBe(MAX_NEW_TOKENS - 1);
      expect(after.rowSteps - before.rowSteps).toBe(after.steps - before.steps);
    },
  );

  it(
    "/v1/completions and /v1/chat/completions answer in OpenAI's shapes, text prompts tokenized as /generate " + 'does',
    async () => {
      const completion = await post('/v1/completions', {
        prompt: '1+2=',
        max_tokens: 4,
        n: 2,
        seed: 7,
        logprobs: 0,
        return_token_ids: true,
      });
      expect(completion.status).toBe(200);
      expect(completion.json).toMatchObject({
        object: 'text_completion',
        model: dirs.base,
        usage: { prompt_tokens: completion.json.choices[0].prompt_token_ids.length },
      });
      const generated = await post('/generate', {
        text: '1+2=',
        sampling_params: { max_new_tokens: 4, n: 2, sampling_seed: 7 },
      });
      expect(completion.json.choices.map((c: any) => c.token_ids)).toEqual(
        generated.json.map((o: any) => o.output_ids),
      );
      for (const c of completion.json.choices) {
        expect(c.logprobs.tokens).toHaveLength(c.token_ids.length);
        expect(['stop', 'length']).toContain(c.finish_reason);
      }
      const chat = await post('/v1/chat/completions', {
        messages: [{ role: 'user', content: '1+2=' }],
        max_tokens: 4,
        logprobs: true,
        return_token_ids: true,
      });
      expect(chat.status).toBe(200);
      expect(chat.json).toMatchObject({
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant' } }],
      });
      const rendered = await post('/generate', {
        text: '<|user|>1+2=<|assistant|>',
        sampling_params: { max_new_tokens: 1, temperature: 0 },
      });
      expect(chat.json.usage.prompt_tokens).toBe(rendered.json.meta_info.prompt_tokens);
      expect(chat.json.choices[0].logprobs.content).toHaveLength(chat.json.choices[0].token_ids.length);
      // Stops: a stop token ends the sample on it; a stop string ends the text before it (the seed fixes the tokens
      // before).
      const sampled = {
        prompt: [1, 5, 13, 6],
        max_tokens: MAX_NEW_TOKENS,
        temperature: 1,
        seed: 4,
        return_token_ids: true,
        logprobs: 0,
      };
      const full = (await post('/v1/completions', sampled)).json.choices[0];
      const at = full.token_ids.findIndex(
        (id: number, t: number) => t > 0 && full.token_ids.indexOf(id) === t && full.logprobs.tokens[t].trim() !== '',
      );
      expect(at).toBeGreaterThan(0);
      const stopId = full.token_ids[at];
      const byToken = (await post('/v1/completions', { ...sampled, stop_token_ids: [stopId] })).json.choices[0];
      expect(byToken).toMatchObject({
        token_ids: full.token_ids.slice(0, at + 1),
        finish_reason: 'stop',
        stop_reason: stopId,
      });
      const stopText = full.logprobs.tokens[at];
      const byString = (await post('/v1/completions', { ...sampled, stop: [stopText] })).json.choices[0];
      expect(byString).toMatchObject({
        text: full.text.slice(0, full.text.indexOf(stopText)),
        finish_reason: 'stop',
        stop_reason: stopText,
      });
      const models = await (await fetch(`${url}/v1/models`)).json();
      expect(models).toMatchObject({
        object: 'list',
        data: [{ id: dirs.base, object: 'model', max_model_len: 16 + MAX_NEW_TOKENS }],
      });
    },
  );

  it("refuses bad requests with OpenAI's error body and keeps serving", async () => {
    const cases: [string, unknown, number, string | null][] = [
      ['/generate', '{not json', 400, null],
      ['/generate', { input_ids: [1, VOCAB] }, 400, 'input_ids'],
      ['/generate', { text: 'a', sampling_params: { max_new_tokens: MAX_NEW_TOKENS + 1 } }, 400, 'max_tokens'],
      ['/generate', { input_ids: new Array(17).fill(1) }, 400, 'input_ids'],
      // A stream's request is checked before the stream starts.
      ['/v1/completions', { prompt: 'a', stream: true, max_tokens: MAX_NEW_TOKENS + 1 }, 400, 'max_tokens'],
      ['/v1/completions', { prompt: 'a', model: 'gpt-4' }, 404, 'model'],
      ['/v1/completions', { prompt: 'a', temperature: 'hot' }, 400, 'temperature'],
      ['/v1/chat/completions', { messages: 'hi' }, 400, 'messages'],
      ['/nowhere', {}, 404, null],
    ];
    for (const [path, body, status, param] of cases) {
      const res = await post(path, body);
      expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(status);
      expect(res.json.error).toMatchObject({
        type: expect.any(String),
        message: expect.any(String),
        param,
        code: status,
      });
    }
    expect((await fetch(`${url}/generate`)).status).toBe(405);
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });

  it(
    'update_weights_from_disk serves the new weights; a mismatched or non-finite checkpoint is refused and the old ' +
      'weights serve on',
    async () => {
      const probe = {
        input_ids: [1, 5, 13, 6],
        sampling_params: { temperature: 0, max_new_tokens: 4 },
        return_logprob: true,
      };
      const logprobsNow = async () => samplesOf((await post('/generate', probe)).json)[0].logprobs;
      const before = await logprobsNow();
      const updated = await post('/update_weights_from_disk', { model_path: dirs.other, weight_version: 'step-1' });
      expect(updated).toEqual({
        status: 200,
        json: { success: true, message: expect.any(String), num_paused_requests: 0 },
      });
      const after = await logprobsNow();
      expect(after).not.toEqual(before);
      expect(await (await fetch(`${url}/get_model_info`)).json()).toMatchObject({
        model_path: dirs.other,
        weight_version: 'step-1',
      });
      for (const [dir, reason] of [
        [dirs.wider, 'hiddenSize 32 vs 48'],
        [dirs.nonFinite, 'non-finite'],
        [join(dirs.base, 'missing'), 'config.json'],
      ]) {
        const refused = await post('/update_weights_from_disk', { model_path: dir });
        expect(refused.status, dir).toBe(400);
        expect(refused.json).toMatchObject({ success: false, message: expect.stringContaining(reason) });
        expect(await logprobsNow()).toEqual(after);
      }
      expect((await post('/update_weights_from_disk', { model_path: dirs.base })).status).toBe(200);
      expect(await logprobsNow()).toEqual(before);
    },
  );

  it('loads a LoRA adapter by name, serves it as a model, and unloads it', async () => {
    const loaded = await post('/load_lora_adapter', { lora_name: 'tuned', lora_path: dirs.adapter });
    expect(loaded).toEqual({
      status: 200,
      json: { success: true, error_message: null, loaded_adapters: { tuned: dirs.adapter } },
    });
    expect((await post('/load_lora_adapter', { lora_name: 'tuned', lora_path: dirs.adapter })).json).toMatchObject({
      success: false,
    });
    const body = { prompt: [1, 5, 13, 6], max_tokens: 4, temperature: 0, logprobs: 0 };
    const base = (await post('/v1/completions', body)).json.choices[0].logprobs.token_logprobs;
    const adapted = (await post('/v1/completions', { ...body, model: 'tuned' })).json.choices[0].logprobs
      .token_logprobs;
    expect(adapted).not.toEqual(base);
    expect((await (await fetch(`${url}/v1/models`)).json()).data.map((m: any) => m.id)).toEqual([dirs.base, 'tuned']);
    expect((await post('/unload_lora_adapter', { lora_name: 'tuned' })).json).toMatchObject({
      success: true,
      loaded_adapters: {},
    });
    expect((await post('/v1/completions', { ...body, model: 'tuned' })).status).toBe(404);
    // vLLM's routes: a line of text on success, its error body otherwise.
    const vllm = await fetch(`${url}/v1/load_lora_adapter`, {
      method: 'POST',
      body: JSON.stringify({ lora_name: 'v', lora_path: dirs.adapter }),
    });
    expect([vllm.status, await vllm.text()]).toEqual([200, "Success: LoRA adapter 'v' added successfully."]);
    expect((await post('/v1/completions', { ...body, model: 'v' })).json.choices[0].logprobs.token_logprobs).toEqual(
      adapted,
    );
    expect(await post('/v1/unload_lora_adapter', { lora_name: 'nope' })).toMatchObject({
      status: 400,
      json: { error: { param: 'lora_name' } },
    });
    expect(
      (await fetch(`${url}/v1/unload_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: 'v' }) }))
        .status,
    ).toBe(200);
  });
});
