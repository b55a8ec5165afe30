// `node serve.js --dtype bfloat16` (vLLM's flag): stories260K served in bf16 beside the float32 server, in this
// process (ModelHost + ServeHttp, what serve.js runs). The half server holds its matrices in bf16 and no float32 copy
// (half the weight bytes), its KV cache in bf16 (the same memory budget fits about twice the sequences, and what the
// decode batch allocates stays within it), reports its dtypes, and its log-probs of the same forced tokens are the
// float32 server's within the bound the half rollout states (test/webgpu/decode-step.test.ts: |Δ log p| below
// 0.02·max|log p|). Half sampling may draw other tokens, so the float32 server scores the tokens the bf16 one drew.
// A LoRA adapter and /update_weights_from_disk work on the half weights.
import { it, expect, beforeAll, afterAll } from 'vitest';
import { cp, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gpuEngine } from '../support/gpu-engine.ts';
import { seededRandom } from '../support/arrays.ts';
import { describeWithFixtures, fixturePath } from '../support/fixtures.ts';
import type { Engine } from '../../engine/index.ts';
import { ModelHost, type ServeOptions } from '../../ppo/serving/model-host-node.ts';
import { ServeHttp } from '../../ppo/serving/http-server-node.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, loraValuesFromPeft, peftTensors, resolveTargetModules } from '../../models/lora.ts';
import { saveLoraAdapter } from '../../models/lora-files-node.ts';

const PROMPT = 'Once upon a time, there was a little girl named Lily.';
const OPTIONS: Omit<ServeOptions, 'modelDir' | 'dtype'> = {
  servedModelName: 'stories',
  maxPromptTokens: 64,
  maxNewTokens: 64,
  maxSlots: 4,
  maxRequestSamples: 64,
  gpuMemoryUtilization: 0.5,
  maxLogprobs: 20,
  kvCacheDtype: 'auto',
};

interface Served {
  host: ModelHost;
  http: ServeHttp;
  url: string;
  /** Bytes the engine allocated while the model loaded: its weights. */
  weightBytes: number;
}

let engine: Engine;
const served: Served[] = [];
let f32: Served;
let bf16: Served;
const dirs = { variant: '', adapter: '' };

async function serve(options: Partial<ServeOptions> & Pick<ServeOptions, 'dtype'>): Promise<Served> {
  const before = engine.allocatedBytes;
  const host = await ModelHost.open(engine, { ...OPTIONS, modelDir: fixturePath('hf/stories260K'), ...options });
  const weightBytes = engine.allocatedBytes - before;
  const http = new ServeHttp(host, () => {}, 'test');
  const port = await http.listen(0, '127.0.0.1');
  const s = { host, http, url: `http://127.0.0.1:${port}`, weightBytes };
  served.push(s);
  return s;
}

async function post(s: Served, path: string, body: unknown): Promise<any> {
  const res = await fetch(s.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await res.json();
  expect(res.status, JSON.stringify(json)).toBe(200);
  return json;
}

const getJson = async (s: Served, path: string) => (await fetch(s.url + path)).json();

/** Each token's log-prob after the first, given the tokens before it (echo with max_tokens 0: no decoding). */
async function scored(s: Served, ids: number[], model = 'stories'): Promise<number[]> {
  const c = await post(s, '/v1/completions', { model, prompt: ids, max_tokens: 0, echo: true, logprobs: 0 });
  return c.choices[0].logprobs.token_logprobs.slice(1);
}

/** The rollout's stated bf16 bound: every |Δ log p| below 0.02·max|log p|, and the two differ (rounding is real). */
function expectWithinHalfBound(half: number[], full: number[], what: string): void {
  expect(half).toHaveLength(full.length);
  const gap = Math.max(...half.map((x, i) => Math.abs(x - full[i])));
  const scale = Math.max(...full.map(Math.abs));
  expect(gap, what).toBeLessThan(0.02 * scale);
  expect(gap, `${what}: bf16 equals float32`).toBeGreaterThan(0);
}

/** A PEFT adapter of stories260K with random (non-zero) B, so it changes the model's outputs. */
async function saveAdapter(dir: string): Promise<void> {
  const config = f32.host.config;
  const settings = {
    rank: 2,
    alpha: 4,
    targetModules: resolveTargetModules(['all-linear'], null, 'target_modules'),
    useRslora: false,
  };
  const peft = peftTensors(config, settings, initialLoraValues(config, settings, 5));
  const random = seededRandom(6);
  for (const [name, t] of peft)
    if (name.endsWith('.lora_B.weight')) t.data.forEach((_, i, b) => (b[i] = 0.2 * (random() - 0.5)));
  const values = loraValuesFromPeft(config, settings, (n) => peft.get(n), 'test');
  const adapters = new LoraAdapters(engine, config, settings, values, 'precision-test');
  await saveLoraAdapter(dir, adapters, null);
  adapters.destroy();
}

/** stories260K with every weight scaled by 0.9 (float32 safetensors, rewritten in place). */
async function saveScaledCopy(dir: string): Promise<void> {
  await cp(fixturePath('hf/stories260K'), dir, { recursive: true });
  const file = join(dir, 'model.safetensors');
  const bytes = await readFile(file);
  const headerBytes = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerBytes).toString('utf8'));
  for (const [name, t] of Object.entries<any>(header)) {
    if (name === '__metadata__') continue;
    expect(t.dtype).toBe('F32');
    const [from, to] = t.data_offsets as [number, number];
    for (let o = 8 + headerBytes + from; o < 8 + headerBytes + to; o += 4)
      bytes.writeFloatLE(0.9 * bytes.readFloatLE(o), o);
  }
  await writeFile(file, bytes);
}

describeWithFixtures('node serve.js --dtype bfloat16 (stories260K)', ['hf/stories260K/model.safetensors'], () => {
  beforeAll(async () => {
    engine = await gpuEngine();
    f32 = await serve({ dtype: 'auto' });
    bf16 = await serve({ dtype: 'bfloat16' });
    const root = await mkdtemp(join(tmpdir(), 'serve-precision-'));
    dirs.variant = join(root, 'variant');
    dirs.adapter = join(root, 'adapter');
    await saveScaledCopy(dirs.variant);
    await saveAdapter(dirs.adapter);
  });

  afterAll(async () => {
    for (const s of served) {
      await s.http.close();
      s.host.destroy();
    }
  });

  it('reports its dtypes and holds its weights in half the bytes, with no float32 copy', async () => {
    // --dtype auto serves a float32 checkpoint in float32 (serve-dtype.ts says why), the KV cache in --dtype's.
    expect((await getJson(f32, '/get_model_info')).dtype).toBe('float32');
    expect(await getJson(f32, '/get_server_info')).toMatchObject({ dtype: 'float32', kv_cache_dtype: 'float32' });
    expect((await getJson(bf16, '/get_model_info')).dtype).toBe('bfloat16');
    expect(await getJson(bf16, '/get_server_info')).toMatchObject({ dtype: 'bfloat16', kv_cache_dtype: 'bfloat16' });
    // Matrices halve; the norms stay float32 (a few hundred floats), and the arena rounds each tensor up a little.
    expect(bf16.weightBytes / f32.weightBytes).toBeGreaterThan(0.45);
    expect(bf16.weightBytes / f32.weightBytes).toBeLessThan(0.55);
  });

  it('a bf16 KV cache fits about twice the sequences in the same budget, and the decode batch stays within it', async () => {
    // A cache-dominated shape (a 16-token prompt, 496 new tokens: the model's 512 positions) and a budget of a few
    // dozen sequences; --max-slots out of the way.
    const shape = {
      maxPromptTokens: 16,
      maxNewTokens: 496,
      maxSlots: 4096,
      gpuMemoryUtilization: (24 << 20) / engine.memory.bytes,
    };
    const budget = shape.gpuMemoryUtilization * engine.memory.bytes;
    const slots: number[] = [];
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const s = await serve({ dtype, ...shape });
      const before = engine.allocatedBytes;
      // The warm-up makes the decode batch's decoders for every slot, the KV caches included.
      await s.host.warmUp();
      const allocated = engine.allocatedBytes - before;
      expect(allocated, `${dtype} decode batch`).toBeLessThanOrEqual(budget);
      // The budget is what bounds the slots: most of it is taken (87-96% measured).
      expect(allocated, `${dtype} decode batch`).toBeGreaterThan(0.75 * budget);
      slots.push(s.host.batch.slots);
      expect((await getJson(s, '/get_server_info')).max_running_requests).toBe(s.host.batch.slots);
    }
    // Caches halve; the prefill's float32 activations and the LM head's row do not.
    expect(slots[1] / slots[0]).toBeGreaterThan(1.75);
    expect(slots[1] / slots[0]).toBeLessThanOrEqual(2);
  });

  it("prompt log-probs and generated tokens' log-probs are float32's within the half rollout's bound", async () => {
    const prompt = (await post(f32, '/tokenize', { prompt: PROMPT })).tokens as number[];
    expectWithinHalfBound(await scored(bf16, prompt), await scored(f32, prompt), 'prompt log-probs');
    // The bf16 server's greedy story: its sampled log-probs are its own teacher-forced scores (the scorer prefills
    // through the same bf16 cache), and the float32 server's scores of the same tokens within the bound.
    const g = await post(bf16, '/generate', {
      input_ids: prompt,
      return_logprob: true,
      sampling_params: { temperature: 0, max_new_tokens: 32 },
    });
    const tokens = g.output_ids as number[];
    const sampled = (g.meta_info.output_token_logprobs as [number][]).map(([lp]) => lp);
    expect(tokens.length).toBeGreaterThan(16);
    const ownScores = (await scored(bf16, [...prompt, ...tokens])).slice(prompt.length - 1);
    ownScores.forEach((lp, t) => expect(Math.abs(lp - sampled[t]), `token ${t}`).toBeLessThan(1e-4));
    const fullScores = (await scored(f32, [...prompt, ...tokens])).slice(prompt.length - 1);
    expectWithinHalfBound(sampled, fullScores, 'generated tokens');
  });

  it('serves a LoRA adapter on the bf16 weights and takes a weight update from disk', async () => {
    const prompt = (await post(f32, '/tokenize', { prompt: PROMPT })).tokens as number[];
    const base = await scored(bf16, prompt);
    for (const s of [f32, bf16]) await post(s, '/load_lora_adapter', { lora_name: 'a', lora_path: dirs.adapter });
    const adapted = await scored(bf16, prompt, 'a');
    expect(Math.max(...adapted.map((x, i) => Math.abs(x - base[i])))).toBeGreaterThan(1e-2);
    expectWithinHalfBound(adapted, await scored(f32, prompt, 'a'), 'adapter prompt log-probs');
    // A weight update rounds the new weights to bf16 in place: the same scores as a bf16 server opened on them.
    await post(bf16, '/update_weights_from_disk', { model_path: dirs.variant });
    const updated = await scored(bf16, prompt);
    const fresh = await serve({ dtype: 'bfloat16', modelDir: dirs.variant });
    expect((await getJson(bf16, '/get_model_info')).dtype).toBe('bfloat16');
    const want = await scored(fresh, prompt);
    updated.forEach((lp, t) => expect(Math.abs(lp - want[t]), `token ${t}`).toBeLessThan(1e-6));
    expect(Math.max(...updated.map((x, i) => Math.abs(x - base[i])))).toBeGreaterThan(1e-2);
  });
});
