// Rollout servers without a device: the documented SGLang and vLLM shapes, and the faults a pool of servers must
// survive or stop on, with stub servers on loopback (refused connections, timeouts, HTTP 500, malformed JSON, a
// server dying mid-batch, a server of another model, a weight load that fails); an async run's prefetched batch as a
// checkpoint holds it.
import { describe, expect, it, afterEach } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServerPool } from '../../ppo/generation/remote/server-pool.ts';
import { ServerRollout, probeSequence, type WeightsPublisher } from '../../ppo/generation/remote/remote-generation.ts';
import {
  generateCall,
  parseGenerate,
  parseModelInfo,
  weightUpdateCalls,
} from '../../ppo/generation/remote/wire-format.ts';
import type { RolloutConfig } from '../../ppo/generation/types.ts';
import { type ConfigError, composeConfig, loadConfig } from '../../ppo/config.ts';
import { planStep } from '../../ppo/step-plan.ts';
import { SampleRecord, assemble, disassemble, promptBatch } from '../../ppo/generation/sample-records.ts';
import { checkpointProblem } from '../../ppo/run-directory/checkpoint-node.ts';

const EOS = 2;
const VOCAB = 50;

type Behaviour = 'ok' | 'hang' | 'http500' | 'malformed' | 'die' | 'foreignTokens';

/** An SGLang-shaped stub: every response (the fingerprint's probe too) is [7, 8, EOS] with log-prob `logProb` each. */
interface Stub {
  url: string;
  behaviour: Behaviour;
  /** Behaviour switches to `after.behaviour` once this many /generate requests were answered. */
  after: { count: number; behaviour: Behaviour } | null;
  logProb: number;
  updateSuccess: boolean;
  generated: number;
  loads: string[];
  server: Server;
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise((done) => {
          s.closeAllConnections();
          s.close(done);
        }),
    ),
  );
});

async function readBody(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : null;
}

async function stubServer(behaviour: Behaviour = 'ok'): Promise<Stub> {
  const stub = {
    behaviour,
    after: null,
    logProb: -0.5,
    updateSuccess: true,
    generated: 0,
    loads: [],
  } as unknown as Stub;
  const send = (res: ServerResponse, json: unknown) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(json));
  stub.server = createServer(async (req, res) => {
    const body = (await readBody(req)) as Record<string, unknown> | null;
    if (req.url === '/get_model_info') return send(res, { model_path: '/models/tiny' });
    if (req.url === '/update_weights_from_disk') {
      stub.loads.push(String(body!.model_path));
      return send(
        res,
        stub.updateSuccess ? { success: true, message: 'ok' } : { success: false, message: 'shape mismatch' },
      );
    }
    if (req.url !== '/generate') return res.writeHead(404).end(JSON.stringify({ error: { message: 'not found' } }));
    const ids = body!.input_ids as number[][];
    const mode = stub.after && stub.generated >= stub.after.count ? stub.after.behaviour : stub.behaviour;
    if (mode === 'hang') return;
    if (mode === 'die') return req.socket.destroy();
    if (mode === 'http500')
      return res
        .writeHead(500, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: 'CUDA out of memory' } }));
    if (mode === 'malformed') return res.writeHead(200).end('{"meta_info": [');
    if (mode === 'foreignTokens') {
      return send(
        res,
        ids.map(() => ({
          meta_info: { finish_reason: { type: 'length' }, output_token_logprobs: [[-0.5, VOCAB + 7, null]] },
        })),
      );
    }
    stub.generated++;
    send(
      res,
      ids.map(() => ({
        text: '',
        output_ids: [7, 8, EOS],
        meta_info: {
          finish_reason: { type: 'stop', matched: EOS },
          output_token_logprobs: [7, 8, EOS].map((id) => [stub.logProb, id, null]),
        },
      })),
    );
  });
  servers.push(stub.server);
  await new Promise<void>((done) => stub.server.listen(0, '127.0.0.1', done));
  stub.url = `http://127.0.0.1:${(stub.server.address() as AddressInfo).port}`;
  return stub;
}

/** A URL nothing listens on: a port that was just free. */
async function refusingUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((done) => s.listen(0, '127.0.0.1', done));
  const port = (s.address() as AddressInfo).port;
  await new Promise((done) => s.close(done));
  return `http://127.0.0.1:${port}`;
}

const ROLLOUT: RolloutConfig = {
  n: 2,
  temperature: 1,
  topK: -1,
  topP: 1,
  maxResponseLength: 4,
  eosTokenIds: [EOS],
  padTokenId: 0,
  seed: 1,
};
const PROMPTS = Array.from({ length: 6 }, (_, i) => [3 + i, 4, 5]);

function rollout(
  urls: string[],
  options: { timeoutS?: number; maxRetries?: number; lost?: string[] } = {},
): ServerRollout {
  const pool = new ServerPool(urls, {
    // Longer than a loaded machine may starve a stub (they share this process): only a hanging stub reaches it.
    timeoutS: options.timeoutS ?? 60,
    maxRetries: options.maxRetries ?? 2,
    onServerLost: (url, reason) => options.lost?.push(`${url}: ${reason}`),
  });
  const publisher: WeightsPublisher = {
    publish: async (version) => ({ version, dir: `/shared/v${version}`, kind: 'full' }),
  };
  return new ServerRollout(pool, 'sglang', publisher, { fingerprintTolerance: 0.01, vocabSize: VOCAB });
}

const PROBE = probeSequence(VOCAB);
/** The trainer's side of the fingerprint, as if its weights gave every token log-prob `value`. */
const localProbe = (value: number) => async (ids: readonly number[]) => ids.slice(1).map(() => value);

describe('rollout servers: documented wire shapes', () => {
  it('SGLang /generate: the prompt repeated n times, answers read from output_token_logprobs', () => {
    const call = generateCall(
      'sglang',
      'm',
      [1, 2],
      2,
      {
        temperature: 0.7,
        topP: 0.9,
        topK: 5,
        maxTokens: 8,
        stopTokenIds: [EOS],
        ignoreEos: false,
        seed: 3,
        sampleOffset: null,
      },
      null,
    );
    expect(call.path).toBe('/generate');
    expect(call.body).toMatchObject({
      input_ids: [
        [1, 2],
        [1, 2],
      ],
      return_logprob: true,
      sampling_params: { max_new_tokens: 8, top_k: 5, stop_token_ids: [EOS] },
    });
    // sample_offset is serve.js's own field: only sent when the server said it is serve.js (SGLang would refuse it).
    expect((call.body as { sampling_params: object }).sampling_params).not.toHaveProperty('sample_offset');
    const toEngine = generateCall(
      'sglang',
      'm',
      [1, 2],
      2,
      { temperature: 1, topP: 1, topK: -1, maxTokens: 8, stopTokenIds: [], ignoreEos: true, seed: 3, sampleOffset: 6 },
      null,
    );
    // verl's rollout.ignore_eos goes to the server as SGLang's (and vLLM's) ignore_eos.
    expect(toEngine.body).toMatchObject({ sampling_params: { sampling_seed: 3, sample_offset: 6, ignore_eos: true } });
    expect((call.body as { sampling_params: object }).sampling_params).not.toHaveProperty('ignore_eos');
    expect(parseModelInfo('sglang', { model_path: '/m' })).toEqual({ name: '/m', engineServer: false });
    expect(parseModelInfo('sglang', { model_path: '/m', owned_by: 'webgpu-rlhf' })).toEqual({
      name: '/m',
      engineServer: true,
    });
    expect(parseModelInfo('vllm', { data: [{ id: 'q', owned_by: 'vllm' }] })).toEqual({
      name: 'q',
      engineServer: false,
    });
    const out = (ids: number[], type: string) => ({
      meta_info: { finish_reason: { type }, output_token_logprobs: ids.map((id) => [-1, id, null]) },
    });
    expect(parseGenerate('sglang', [out([4, EOS], 'stop'), out([4, 5], 'length')], 2, [EOS])).toEqual([
      { tokenIds: [4, EOS], logProbs: [-1, -1], finishReason: 'eos' },
      { tokenIds: [4, 5], logProbs: [-1, -1], finishReason: 'length' },
    ]);
    expect(() => parseGenerate('sglang', [out([4], 'stop')], 2, [EOS])).toThrow('a JSON array of 2 /generate outputs');
  });

  it('vLLM /v1/completions: token ids back as "token_id:<id>", choices ordered by index', () => {
    const call = generateCall(
      'vllm',
      'served',
      [1, 2],
      2,
      {
        temperature: 1,
        topP: 1,
        topK: -1,
        maxTokens: 8,
        stopTokenIds: [EOS],
        ignoreEos: false,
        seed: 3,
        sampleOffset: null,
      },
      'actor_v4',
    );
    expect(call.body).toMatchObject({
      model: 'actor_v4',
      prompt: [1, 2],
      n: 2,
      logprobs: 1,
      return_tokens_as_token_ids: true,
    });
    const choice = (index: number, ids: number[], finish: string) => ({
      index,
      text: '',
      finish_reason: finish,
      logprobs: { tokens: ids.map((id) => `token_id:${id}`), token_logprobs: ids.map(() => -2) },
    });
    expect(
      parseGenerate('vllm', { choices: [choice(1, [6, 7], 'length'), choice(0, [EOS], 'stop')] }, 2, [EOS]),
    ).toEqual([
      { tokenIds: [EOS], logProbs: [-2], finishReason: 'eos' },
      { tokenIds: [6, 7], logProbs: [-2, -2], finishReason: 'length' },
    ]);
    expect(() => parseGenerate('vllm', { choices: [choice(0, [1], 'stop')] }, 1, [EOS])).not.toThrow();
    expect(() =>
      parseGenerate(
        'vllm',
        { choices: [{ index: 0, finish_reason: 'stop', logprobs: { tokens: ['a'], token_logprobs: [-1] } }] },
        1,
        [EOS],
      ),
    ).toThrow('return_tokens_as_token_ids');
  });

  it(
    'weight loads: SGLang from any directory; vLLM full weights by the dev-mode level-2 reload; LoRA by name per ' +
      'version',
    () => {
      expect(weightUpdateCalls('sglang', { version: 3, dir: '/w/v3', kind: 'full' }, null)).toEqual([
        { method: 'POST', path: '/update_weights_from_disk', body: { model_path: '/w/v3', weight_version: 'v3' } },
      ]);
      expect(weightUpdateCalls('vllm', { version: 3, dir: '/w/v3', kind: 'full' }, null).map((c) => c.path)).toEqual([
        '/sleep?level=2',
        '/wake_up?tags=weights',
        '/collective_rpc',
        '/wake_up?tags=kv_cache',
      ]);
      expect(weightUpdateCalls('vllm', { version: 3, dir: '/w/v3', kind: 'lora' }, 'actor_v2')).toEqual([
        { method: 'POST', path: '/v1/load_lora_adapter', body: { lora_name: 'actor_v3', lora_path: '/w/v3' } },
        { method: 'POST', path: '/v1/unload_lora_adapter', body: { lora_name: 'actor_v2' } },
      ]);
    },
  );
});

describe('rollout servers: configuration', () => {
  const problems = (...overrides: string[]) => {
    try {
      loadConfig({ overrides });
      return [];
    } catch (err) {
      return (err as ConfigError).problems;
    }
  };
  const URLS = 'actor_rollout_ref.rollout.server_urls=[http://127.0.0.1:30000,http://127.0.0.1:30001]';

  it("server_urls need a server backend; verl's name=vllm without them stays in-process", () => {
    expect(problems(URLS)[0]).toContain('actor_rollout_ref.rollout.name=hf generates in-process');
    expect(problems('actor_rollout_ref.rollout.name=vllm', 'actor_rollout_ref.rollout.mode=async')).toEqual([]);
    // …and says so in one note, which a run prints to stderr; with servers, or with name=hf, no such note.
    const inProcessNotes = (...overrides: string[]) =>
      composeConfig({ overrides }).notes.filter((n) => n.includes('without rollout.server_urls'));
    expect(inProcessNotes('actor_rollout_ref.rollout.name=vllm')).toEqual([
      'actor_rollout_ref.rollout.name=vllm without rollout.server_urls: responses are generated in-process, on this ' +
        "engine's decoder (docs/rollout-servers.md)",
    ]);
    expect(inProcessNotes('actor_rollout_ref.rollout.name=sglang', URLS)).toEqual([]);
    expect(inProcessNotes()).toEqual([]);
    const noRecompute = 'actor_rollout_ref.rollout.calculate_log_probs=false';
    const config = loadConfig({ overrides: ['actor_rollout_ref.rollout.name=sglang', URLS, noRecompute] });
    expect(config.actor_rollout_ref.rollout.server_urls).toEqual(['http://127.0.0.1:30000', 'http://127.0.0.1:30001']);
    // Old log-probs are recomputed by the trainer with servers even without calculate_log_probs.
    expect(planStep(config).experience.calculateLogProbs).toBe(true);
    expect(planStep(loadConfig({ overrides: [noRecompute] })).experience.calculateLogProbs).toBe(false);
  });

  it('refuses what servers cannot run: search rollouts, and dynamic sampling with mode=async', () => {
    expect(
      problems(
        'actor_rollout_ref.rollout.name=sglang',
        URLS,
        'do_search=true',
        'retriever.url=http://127.0.0.1:8000/retrieve',
      )[0],
    ).toContain('multi-turn search rollouts run in-process only');
    expect(
      problems(
        'actor_rollout_ref.rollout.name=sglang',
        URLS,
        'actor_rollout_ref.rollout.mode=async',
        'algorithm.filter_groups.enable=true',
        'algorithm.filter_groups.metric=acc',
      )[0],
    ).toContain('one-step-off generation cannot prefetch');
  });
});

/** The deadline of a test with a hanging stub: the good stub in this process must answer within it, starved or not. */
const HANG_DEADLINE_S = 10;

describe('rollout servers: faults on loopback', () => {
  it('spreads the prompts over both servers and keeps their order', async () => {
    const [a, b] = [await stubServer(), await stubServer()];
    const batch = await rollout([a.url, b.url]).generate(PROMPTS, ROLLOUT);
    expect(a.generated + b.generated).toBe(PROMPTS.length);
    expect(Math.min(a.generated, b.generated)).toBeGreaterThan(0);
    expect(batch.groupIds).toEqual([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
    expect(batch.responses[5]).toEqual([7, 8, EOS, 0]);
    expect(Array.from(batch.oldLogProbs[5])).toEqual([-0.5, -0.5, -0.5, 0]);
    expect(batch.finishReasons.every((r) => r === 'eos')).toBe(true);
  });

  for (const [fault, make] of [
    // The first call to a server asks who it is: that is where a refused connection shows.
    [
      'refuses connections',
      async () => ({ url: await refusingUrl(), expect: 'connection refused', path: '/get_model_info' }),
    ],
    [
      'times out',
      async () => ({ url: (await stubServer('hang')).url, expect: `no answer within ${HANG_DEADLINE_S}s` }),
    ],
    [
      'answers HTTP 500',
      async () => ({ url: (await stubServer('http500')).url, expect: 'HTTP 500 (CUDA out of memory)' }),
    ],
    [
      'answers malformed JSON',
      async () => ({ url: (await stubServer('malformed')).url, expect: 'the answer is not JSON' }),
    ],
  ] as const) {
    it(`a server that ${fault}: its prompts go to the other server, and it leaves the pool`, async () => {
      const good = await stubServer();
      const bad = await make();
      const lost: string[] = [];
      // Each fault is told by what it is (the reason below), not by how soon: only the hanging stub waits for the
      // deadline, which the good stub must beat.
      const timeoutS = fault === 'times out' ? HANG_DEADLINE_S : undefined;
      const batch = await rollout([bad.url, good.url], { timeoutS, lost }).generate(PROMPTS, ROLLOUT);
      expect(batch.responses).toHaveLength(PROMPTS.length * ROLLOUT.n);
      expect(good.generated).toBe(PROMPTS.length);
      expect(lost).toHaveLength(1);
      expect(lost[0]).toContain(`${bad.url}${'path' in bad ? bad.path : '/generate'}: ${bad.expect}`);
    });
  }

  it('a server that dies mid-batch: what it had not answered goes to the other', async () => {
    const [dying, good] = [await stubServer(), await stubServer()];
    dying.after = { count: 1, behaviour: 'die' };
    const lost: string[] = [];
    const batch = await rollout([dying.url, good.url], { lost }).generate(PROMPTS, ROLLOUT);
    expect(batch.responses).toHaveLength(PROMPTS.length * ROLLOUT.n);
    expect(dying.generated + good.generated).toBe(PROMPTS.length);
    expect(dying.generated).toBe(1);
    expect(lost[0]).toContain('the connection was closed');
  });

  it('a server answering tokens outside the vocabulary (another tokenizer) leaves the pool', async () => {
    const [foreign, good] = [await stubServer('foreignTokens'), await stubServer()];
    const lost: string[] = [];
    await rollout([foreign.url, good.url], { lost }).generate(PROMPTS, ROLLOUT);
    expect(good.generated).toBe(PROMPTS.length);
    expect(lost[0]).toMatch(
      new RegExp(`holds token ${VOCAB + 7}; expected ids in the actor's vocabulary \\[0, ${VOCAB}\\)`),
    );
  });

  it('no server left: the batch stops with one line naming the URL and what was expected', async () => {
    const [a, b] = [await stubServer('http500'), await stubServer('malformed')];
    const failure = rollout([a.url, b.url]).generate(PROMPTS, ROLLOUT);
    await expect(failure).rejects.toThrow(
      /^http:\/\/127\.0\.0\.1:\d+\/generate: .*; expected 2 completions of prompt \d \(no rollout server left\)$/,
    );
  });

  it('retries are bounded: a prompt that failed on max_retries+1 servers stops the batch', async () => {
    const bad = await Promise.all([stubServer('http500'), stubServer('http500')]);
    const good = await stubServer('hang');
    const failure = rollout(
      [...bad, good].map((s) => s.url),
      { timeoutS: 1, maxRetries: 1 },
    ).generate(PROMPTS.slice(0, 1), { ...ROLLOUT });
    await expect(failure).rejects.toThrow('(job retried 1 times on other servers)');
  });

  it('a server of another backend (no /get_model_info) is refused before any weight is published', async () => {
    const [good, foreign] = [
      await stubServer(),
      createServer((_, res) => res.writeHead(404).end('{"detail": "Not Found"}')),
    ];
    servers.push(foreign);
    await new Promise<void>((done) => foreign.listen(0, '127.0.0.1', done));
    const foreignUrl = `http://127.0.0.1:${(foreign.address() as AddressInfo).port}`;
    const r = rollout([good.url, foreignUrl]);
    await expect(r.connect()).rejects.toThrow(
      `${foreignUrl}/get_model_info: HTTP 404 (Not Found); expected a sglang server (/get_model_info)`,
    );
    expect(good.loads).toEqual([]);
  });

  it(
    'weight sync: each server loads the version and passes the fingerprint; a server of another model is ' + 'refused',
    async () => {
      const [a, b] = [await stubServer(), await stubServer()];
      const r = rollout([a.url, b.url]);
      const metrics = await r.syncWeights(0, PROBE, localProbe(-0.505));
      expect(metrics['rollout_servers/fingerprint_max_gap']).toBeCloseTo(0.005, 6);
      expect([a.loads, b.loads]).toEqual([['/shared/v0'], ['/shared/v0']]);
      expect(r.servedVersion).toBe(0);
      b.logProb = -2.5; // now serving something else
      await expect(r.syncWeights(1, PROBE, localProbe(-0.5))).rejects.toThrow(
        `${b.url}: after loading /shared/v1 the server's log-probs of its probe tokens differ from the trainer's by ` +
          `up ` +
          `to 2.0000`,
      );
      expect(r.servedVersion).toBe(0);
    },
  );

  it(
    'a weight load that fails stops the sync: the version is not marked served, so no step generates on stale ' +
      'weights',
    async () => {
      const [a, b] = [await stubServer(), await stubServer()];
      b.updateSuccess = false;
      const r = rollout([a.url, b.url]);
      await expect(r.syncWeights(0, PROBE, localProbe(-1))).rejects.toThrow(
        `${b.url}/update_weights_from_disk: malformed answer, expected success: true, got success: false (shape ` +
          `mismatch)`,
      );
      expect(r.servedVersion).toBe(-1);
    },
  );
});

describe('rollout servers: a prefetched batch in a checkpoint', () => {
  it(
    'the samples read back from a batch assemble into the same batch (tokens, log-probs, masks, finish ' + 'reasons)',
    () => {
      const c: RolloutConfig = {
        n: 2,
        maxResponseLength: 4,
        eosTokenIds: [EOS],
        padTokenId: 0,
        temperature: 1,
        topK: -1,
        topP: 1,
        seed: 5,
      };
      const prompts = [[3, 4, 5], [6]];
      const sample = (tokens: number[], logprobs: number[] | null, reason: SampleRecord['reason']) => {
        const record = new SampleRecord();
        record.append(tokens, logprobs);
        record.reason = reason;
        return record;
      };
      const records = [
        sample([7, EOS], [-0.25, -1.5], 'eos'),
        sample([8, 9, 10, 11], [-0.1, -0.2, -0.3, -0.4], 'length'),
        sample([12], [-3], 'stop'),
        sample([13], [-0.7], 'eos'),
      ];
      records[2].append([14, 15], null); // an observation: in the response, out of the mask
      const batch = assemble(promptBatch(prompts, c), records, c);
      const stored = JSON.parse(JSON.stringify(disassemble(batch)));
      expect(assemble(promptBatch(prompts, c), stored, c)).toEqual(batch);
    },
  );

  it(
    'a checkpoint whose trainer_state.json names a prefetched batch cut short cannot be resumed, naming the ' + 'file',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'prefetched-'));
      await writeFile(
        join(dir, 'trainer_state.json'),
        JSON.stringify({ globalStep: 2, prefetchedBatch: 'prefetched_batch.json' }),
      );
      await writeFile(join(dir, 'prefetched_batch.json'), '{"records": [{"promptIds": [1, 2');
      try {
        expect(await checkpointProblem(dir)).toMatch(/^resume: cannot read \S+prefetched_batch\.json \(.*JSON.*\)$/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
