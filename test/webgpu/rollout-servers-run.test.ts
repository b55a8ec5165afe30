// The trainer with two `node serve.js` processes on loopback, 2 steps of the tiny run: responses (greedy, and sampled
// with the same seeds: serve.js takes sample_offset) and every metric equal the in-process run's; each server loads
// each step's weights (its /metrics counts them) and passes the fingerprint; with LoRA each step's adapter; mode=async
// trains one step stale, and a run resumed from a checkpoint trains on the batch prefetched before it; a server that
// refuses a weight load (a stub) stops the run before the step's update with one line naming it; the publisher writes
// one complete directory per version (the full model, or the adapter only).
import { describe, expect, it, afterAll, beforeAll } from 'vitest';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Engine } from '../../engine/index.ts';
import { makeTinyRun, runMetrics, type TinyRun } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { counterValue } from '../../ppo/serving/counters.ts';
import { startServeJs, type ServeProcess } from '../../tools/bench/serve-process.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, resolveTargetModules } from '../../models/lora.ts';
import { loadConfig } from '../../ppo/config.ts';
import { diskWeightsPublisher } from '../../ppo/jobs/weights-publisher-node.ts';

/** What a server's /metrics counted: successful POSTs per route, and the tokens it generated. */
async function served(url: string): Promise<{ loads: number; loraLoads: number; generates: number; tokens: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return {
    loads: counterValue(text, 'requests_total{route="/update_weights_from_disk"}'),
    loraLoads: counterValue(text, 'requests_total{route="/load_lora_adapter"}'),
    generates: counterValue(text, 'requests_total{route="/generate"}'),
    tokens: counterValue(text, 'generation_tokens_total'),
  };
}

/** Each server's counts during `work`. */
async function countedDuring<T>(
  work: () => Promise<T>,
): Promise<{ result: T; counts: Awaited<ReturnType<typeof served>>[] }> {
  const before = await Promise.all(urls.map(served));
  const result = await work();
  const after = await Promise.all(urls.map(served));
  const counts = after.map(
    (a, i) =>
      Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v - before[i][k as keyof typeof a]])) as typeof a,
  );
  return { result, counts };
}

let run: TinyRun;
let engine: Engine;
let servers: ServeProcess[] = [];
let urls: string[] = [];

beforeAll(async () => {
  run = await makeTinyRun(8);
  engine = await Engine.create();
  servers = await Promise.all([0, 1].map(() => startServeJs(join(run.root, 'model'))));
  urls = servers.map((s) => s.url);
});

afterAll(() => {
  for (const s of servers) s.child.kill('SIGTERM');
  engine?.destroy();
});

/**
 * Greedy (one response per prompt, so in-process and server rollouts must agree token for token), old log-probs
 * recomputed in both.
 */
const COMMON = [
  'trainer.total_training_steps=2',
  'actor_rollout_ref.rollout.do_sample=false',
  'actor_rollout_ref.rollout.calculate_log_probs=true',
];

/** The run's metrics and rollout dumps, one per step it logged (a resumed run: the steps after its checkpoint). */
async function train(
  name: string,
  extra: string[],
): Promise<{ code: number; stderr: string; runDir: string; metrics: Record<string, number>[]; dumps: string[] }> {
  const runDir = join(run.root, name);
  const dumpDir = join(run.root, `${name}-dumps`);
  const { code, stderr } = await runCli([
    ...run.overrides,
    ...COMMON,
    `trainer.default_local_dir=${runDir}`,
    `trainer.rollout_data_dir=${dumpDir}`,
    ...extra,
  ]);
  const logged = code === 0 ? await runMetrics(runDir) : [];
  const dumps = await Promise.all(logged.map(({ step }) => readFile(join(dumpDir, `${step}.jsonl`), 'utf8')));
  return { code, stderr, runDir, metrics: logged.map((m) => m.data), dumps };
}

const serverKeys = () => [
  'actor_rollout_ref.rollout.name=sglang',
  `actor_rollout_ref.rollout.server_urls=[${urls.join(',')}]`,
];

/** The same responses (rollout dumps) and the same experience and updates as the in-process run. */
function expectSameRun(remote: Awaited<ReturnType<typeof train>>, local: Awaited<ReturnType<typeof train>>): void {
  expect(remote.dumps).toEqual(local.dumps);
  for (const step of [0, 1]) {
    for (const key of [
      'actor/pg_loss',
      'critic/vf_loss',
      'critic/score/mean',
      'critic/advantages/mean',
      'actor/grad_norm',
    ]) {
      expect(remote.metrics[step][key], `${key} at step ${step + 1}`).toBeCloseTo(local.metrics[step][key], 5);
    }
    // The servers' log-probs (the same decode kernels as the in-process sampler) against the trainer's recompute.
    expect(Math.abs(remote.metrics[step]['rollout_corr/kl'])).toBeLessThan(1e-4);
    expect(remote.metrics[step]['rollout_servers/staleness']).toBe(0);
    expect(remote.metrics[step]['rollout_servers/fingerprint_max_gap']).toBeLessThan(1e-3);
    expect(remote.metrics[step]['rollout_servers/live']).toBe(2);
  }
}

describe('trainer with rollout servers on loopback', () => {
  // First: LoRA adapts the base the servers started with (a full-weight run before it would have replaced it).
  it(
    "LoRA (lora_rank>0): each step's adapter loaded by /load_lora_adapter on every server, the same run as " +
      'in-process',
    async () => {
      const lora = [
        'actor_rollout_ref.model.lora_rank=2',
        'actor_rollout_ref.model.lora_alpha=4',
        'actor_rollout_ref.model.target_modules=all-linear',
      ];
      const local = await train('local-lora', lora);
      expect(local.code, local.stderr).toBe(0);
      const { result: remote, counts } = await countedDuring(() => train('servers-lora', [...serverKeys(), ...lora]));
      expect(remote.code, remote.stderr).toBe(0);
      expectSameRun(remote, local);
      // The base weights stay; each step's adapter (its own name per version) is loaded on each server.
      for (const c of counts) expect([c.loads, c.loraLoads]).toEqual([0, 2]);
      expect((await readdir(join(remote.runDir, 'rollout_weights', 'v1'))).sort()).toEqual([
        'adapter_config.json',
        'adapter_model.safetensors',
      ]);
    },
  );

  it(
    'two servers: the same responses and metrics as the in-process rollout; each server loads and passes each ' +
      "step's weights",
    async () => {
      const local = await train('local', []);
      expect(local.code, local.stderr).toBe(0);
      const { result: remote, counts } = await countedDuring(() => train('servers', serverKeys()));
      expect(remote.code, remote.stderr).toBe(0);
      // (a) the same tokens (the rollout dumps: prompt, response text, score), old log-probs, losses, advantages.
      expectSameRun(remote, local);
      // (b) every server took one weight load per step and now serves v1 from the run's shared directory.
      for (const [i, url] of urls.entries()) {
        expect(counts[i].loads).toBe(2);
        const info = (await (await fetch(`${url}/get_model_info`)).json()) as {
          model_path: string;
          weight_version: string;
        };
        expect(info).toMatchObject({ model_path: join(remote.runDir, 'rollout_weights', 'v1'), weight_version: 'v1' });
      }
      // 4 prompts × 2 steps spread over both, and each server's fingerprint probe after each of its 2 loads.
      expect(counts[0].generates + counts[1].generates).toBe(8 + 4);
      expect(Math.min(counts[0].generates, counts[1].generates)).toBeGreaterThan(2);
    },
  );

  it("sampling on (do_sample=true): serve.js draws the in-process rollout's samples for the same seeds", async () => {
    const sampled = [
      'actor_rollout_ref.rollout.do_sample=true',
      'actor_rollout_ref.rollout.temperature=1.0',
      'actor_rollout_ref.rollout.n=2',
    ];
    const local = await train('local-sampled', sampled);
    expect(local.code, local.stderr).toBe(0);
    const remote = await train('servers-sampled', [...serverKeys(), ...sampled]);
    expect(remote.code, remote.stderr).toBe(0);
    expectSameRun(remote, local);
    // Not greedy: the two samples of some prompt differ, so equal dumps mean equal draws.
    const responses = local.dumps.flatMap((d) =>
      d
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { input: string; output: string }),
    );
    expect(
      responses.some(
        (r, i) => i % 2 === 1 && r.input === responses[i - 1].input && r.output !== responses[i - 1].output,
      ),
    ).toBe(true);
  });

  it("mode=async: step 2 trains on the batch generated with step 1's weights during step 1's update", async () => {
    const overlap = await train('async', [...serverKeys(), 'actor_rollout_ref.rollout.mode=async']);
    expect(overlap.code, overlap.stderr).toBe(0);
    expect(overlap.metrics.map((m) => m['rollout_servers/staleness'])).toEqual([0, 1]);
    // Step 2's old log-probs are recomputed with step 2's weights; the servers sampled with step 1's: they drift.
    expect(Math.abs(overlap.metrics[1]['rollout_corr/kl'])).toBeGreaterThan(1e-5);
  });

  it(
    "mode=async resumed from step 2's checkpoint (in either mode): step 3 trains on the batch step 2 prefetched, as " +
      'the uninterrupted run',
    async () => {
      const async3 = [
        ...serverKeys(),
        'actor_rollout_ref.rollout.mode=async',
        'trainer.total_training_steps=3',
        'trainer.save_freq=2',
        'actor_rollout_ref.rollout.do_sample=true',
        'actor_rollout_ref.rollout.temperature=1.0',
        'actor_rollout_ref.rollout.n=2',
      ];
      const whole = await train('async-whole', async3);
      expect(whole.code, whole.stderr).toBe(0);
      const checkpoint = join(whole.runDir, 'global_step_2');
      const saved = JSON.parse(await readFile(join(checkpoint, 'prefetched_batch.json'), 'utf8')) as {
        weightVersion: number;
        samples: unknown[];
      };
      expect([saved.weightVersion, saved.samples.length]).toEqual([1, 8]);
      // Nothing prefetched (step 3 is the last): the checkpoint has the format of a sync run's.
      expect(await readdir(join(whole.runDir, 'global_step_3'))).not.toContain('prefetched_batch.json');
      expect(
        JSON.parse(await readFile(join(whole.runDir, 'global_step_3', 'trainer_state.json'), 'utf8')),
      ).not.toHaveProperty('prefetchedBatch');
      const trained = (m: Record<string, number>) =>
        Object.fromEntries(Object.entries(m).filter(([key]) => !/^(timing_s|perf|throughput)\b/.test(key)));
      // Resumed as it ran, and with mode=sync (which trains on the saved batch too; the last step prefetches nothing
      // anyway).
      for (const mode of ['async', 'sync']) {
        const resumed = await train(`${mode}-resumed`, [
          ...async3,
          `actor_rollout_ref.rollout.mode=${mode}`,
          'trainer.resume_mode=resume_path',
          `trainer.resume_from_path=${checkpoint}`,
        ]);
        expect(resumed.code, resumed.stderr).toBe(0);
        expect(resumed.metrics).toHaveLength(1);
        // The same prompts, sampled responses and scores (the dump), generated with step 1's weights as in the whole
        // run.
        expect(resumed.dumps[0], mode).toEqual(whole.dumps[2]);
        expect(trained(resumed.metrics[0]), mode).toEqual(trained(whole.metrics[2]));
        expect(resumed.metrics[0]['rollout_servers/staleness']).toBe(1);
      }
      // Samples that do not fit the resumed run's rollout.n: one line, before the run directory is written.
      const refusedDir = join(run.root, 'n1-resumed');
      const refused = await runCli([
        ...run.overrides,
        ...COMMON,
        ...async3,
        'actor_rollout_ref.rollout.n=1',
        `trainer.default_local_dir=${refusedDir}`,
        'trainer.resume_mode=resume_path',
        `trainer.resume_from_path=${checkpoint}`,
      ]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^error: resume: \S+prefetched_batch\.json holds 8 samples of 4 prompts, up to \d tokens each, but this run has actor_rollout_ref\.rollout\.n=1 and data\.max_response_length=3 — resume with the values of the run that saved it, or trainer\.resume_mode=disable$/m,
      );
      await expect(readdir(refusedDir)).rejects.toThrow(/ENOENT/);
    },
  );

  it(
    'mode=async whose prefetch failed: the checkpoint keeps its prompts and seed, and the resumed step generates ' +
      'them again',
    async () => {
      // In front of server 0: everything passes until the 6th /generate (step 1's probe and 4 prompts pass; the
      // prefetch fails).
      let generates = 0;
      const proxy = createServer(async (req, res) => {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        if (req.url === '/generate' && ++generates > 5) {
          res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'out of memory' }));
          return;
        }
        const upstream = await fetch(`${urls[0]}${req.url}`, {
          method: req.method,
          headers: { 'content-type': 'application/json' },
          body: req.method === 'GET' ? undefined : Buffer.concat(chunks),
        });
        res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text());
      });
      await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done));
      const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const async = ['actor_rollout_ref.rollout.name=sglang', 'actor_rollout_ref.rollout.mode=async'];
      try {
        // Step 2 fails on the batch; the save after the error (step 1: save_freq saved nothing) holds what step 2 was
        // given.
        const failing = train('async-failed', [...async, `actor_rollout_ref.rollout.server_urls=[${proxyUrl}]`]);
        await expect(failing).rejects.toThrow(/HTTP 500/);
      } finally {
        await new Promise((done) => {
          proxy.closeAllConnections();
          proxy.close(done);
        });
      }
      const checkpoint = join(run.root, 'async-failed', 'global_step_1');
      const saved = JSON.parse(await readFile(join(checkpoint, 'prefetched_batch.json'), 'utf8')) as {
        records: unknown[];
        samples: unknown;
      };
      expect([saved.records.length, saved.samples]).toEqual([4, null]);
      const whole = await train('async-unfailed', [...async, `actor_rollout_ref.rollout.server_urls=[${urls[0]}]`]);
      expect(whole.code, whole.stderr).toBe(0);
      const resumed = await train('async-refilled', [
        ...async,
        `actor_rollout_ref.rollout.server_urls=[${urls[0]}]`,
        'trainer.resume_mode=resume_path',
        `trainer.resume_from_path=${checkpoint}`,
      ]);
      expect(resumed.code, resumed.stderr).toBe(0);
      // Step 2's prompts, not the next ones; generated now, with step 1's weights.
      const prompts = (dump: string) =>
        dump
          .trim()
          .split('\n')
          .map((line) => (JSON.parse(line) as { input: string }).input);
      expect(prompts(resumed.dumps[0])).toEqual(prompts(whole.dumps[1]));
      expect(resumed.metrics[0]['rollout_servers/staleness']).toBe(0);
    },
  );

  it('a server that refuses the weight load stops the run before any update, naming it', async () => {
    const refusing = createServer(async (req, res) => {
      for await (const _ of req) {
        /* drain */
      }
      const answer =
        req.url === '/get_model_info'
          ? { model_path: 'x' }
          : { success: false, message: 'Failed to load weights: shape mismatch' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
    await new Promise<void>((done) => refusing.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
    try {
      const runDir = join(run.root, 'refused');
      // main() throws; train.js prints the message as its one line (ppo/config/user-error.ts) and exits non-zero.
      const failure = runCli([
        ...run.overrides,
        ...COMMON,
        `trainer.default_local_dir=${runDir}`,
        'trainer.save_freq=1',
        'actor_rollout_ref.rollout.name=sglang',
        `actor_rollout_ref.rollout.server_urls=[${urls[0]},${url}]`,
      ]);
      await expect(failure).rejects.toThrow(
        new RegExp(
          `^${url}/update_weights_from_disk: malformed answer, expected success: true, got success: false \\(Failed ` +
            `to load weights: shape mismatch\\)$`,
        ),
      );
      expect((await readdir(runDir)).filter((n) => n.startsWith('global_step_'))).toEqual([]);
    } finally {
      await new Promise((done) => {
        refusing.closeAllConnections();
        refusing.close(done);
      });
    }
  });

  it(
    "publishing: one complete directory per version, the two newest kept, vLLM's current link on the newest; LoRA " +
      'publishes the adapter only',
    async () => {
      const model = await loadModel(engine, join(run.root, 'model'));
      const config = loadConfig({ overrides: run.overrides });
      const dir = join(run.root, 'published');
      const full = diskWeightsPublisher(dir, 'vllm', {
        engine,
        actor: model,
        config,
        tokenizerFiles: { 'tokenizer.json': '{}' },
      });
      for (const version of [0, 1, 2])
        expect(await full.publish(version)).toEqual({ version, dir: join(dir, `v${version}`), kind: 'full' });
      expect((await readdir(dir)).sort()).toEqual(['current', 'v1', 'v2']);
      expect(await readlink(join(dir, 'current'))).toBe('v2');
      expect((await readdir(join(dir, 'v2'))).sort()).toEqual([
        'config.json',
        'generation_config.json',
        'model.safetensors',
        'tokenizer.json',
      ]);
      const settings = {
        rank: 2,
        alpha: 4,
        targetModules: resolveTargetModules(['all-linear'], null, 'target_modules'),
        useRslora: false,
      };
      const lora = new LoraAdapters(
        engine,
        model.config,
        settings,
        initialLoraValues(model.config, settings, 1),
        'publish-lora',
      );
      const adapter = diskWeightsPublisher(join(run.root, 'published-lora'), 'sglang', {
        engine,
        actor: { ...model, lora },
        config,
        tokenizerFiles: {},
      });
      expect(await adapter.publish(4)).toMatchObject({ kind: 'lora' });
      expect((await readdir(join(run.root, 'published-lora', 'v4'))).sort()).toEqual([
        'adapter_config.json',
        'adapter_model.safetensors',
      ]);
    },
  );
});
