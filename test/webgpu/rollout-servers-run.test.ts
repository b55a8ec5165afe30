// The trainer with two rollout servers on loopback (two `node serve.js` processes; and, to count what each server
// received, this engine's rollout behind SGLang's protocol in the test), 2 steps of the tiny run: greedy responses and every metric equal the in-process run's, each server loads each step's weights and
// passes the fingerprint, mode=async trains one step stale, and a server that refuses a weight load stops the run
// before the step's update with one line naming it; the publisher writes one complete directory per version (the
// full model, or the LoRA adapter only).
import { describe, expect, it, afterAll, beforeAll } from 'vitest';
import { createServer } from 'node:http';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { readFile, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Engine } from '../../engine/index.ts';
import { makeTinyRun, runMetrics, type TinyRun } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { startEngineRolloutServer, type EngineRolloutServer } from '../support/engine-rollout-server.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { LoraAdapters } from '../../models/lora-adapters.ts';
import { initialLoraValues, resolveTargetModules } from '../../models/lora.ts';
import { loadConfig } from '../../ppo/config.ts';
import { diskWeightsPublisher } from '../../ppo/run/rollout-weights-node.ts';

let run: TinyRun;
const engines: Engine[] = [];
let servers: EngineRolloutServer[] = [];

beforeAll(async () => {
  run = await makeTinyRun(8);
  for (let i = 0; i < 2; i++) engines.push(await Engine.create());
  servers = await Promise.all(engines.map((engine) => startEngineRolloutServer(engine, join(run.root, 'model'))));
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  for (const engine of engines) engine.destroy();
});

/** Greedy (one response per prompt, so in-process and server rollouts must agree token for token), old log-probs recomputed in both. */
const COMMON = ['trainer.total_training_steps=2', 'actor_rollout_ref.rollout.do_sample=false', 'actor_rollout_ref.rollout.calculate_log_probs=true'];

async function train(name: string, extra: string[]): Promise<{ code: number; stderr: string; runDir: string; metrics: Record<string, number>[]; dumps: string[] }> {
  const runDir = join(run.root, name);
  const dumpDir = join(run.root, `${name}-dumps`);
  const { code, stderr } = await runCli([...run.overrides, ...COMMON, `trainer.default_local_dir=${runDir}`, `trainer.rollout_data_dir=${dumpDir}`, ...extra]);
  const metrics = code === 0 ? (await runMetrics(runDir)).map((m) => m.data) : [];
  const dumps = code === 0 ? await Promise.all([1, 2].map((step) => readFile(join(dumpDir, `${step}.jsonl`), 'utf8'))) : [];
  return { code, stderr, runDir, metrics, dumps };
}

const serverKeys = () => ['actor_rollout_ref.rollout.name=sglang', `actor_rollout_ref.rollout.server_urls=[${servers.map((s) => s.url).join(',')}]`];

describe('trainer with rollout servers on loopback', () => {
  it('two servers: the same responses and metrics as the in-process rollout; each server loads and passes each step\'s weights', async () => {
    const local = await train('local', []);
    expect(local.code, local.stderr).toBe(0);
    const remote = await train('servers', serverKeys());
    expect(remote.code, remote.stderr).toBe(0);
    // (a) the same tokens: the rollout dumps (prompt, response text, score) of both steps are identical.
    expect(remote.dumps).toEqual(local.dumps);
    // The same experience and updates: old log-probs recomputed by the trainer, losses, scores, advantages.
    for (const step of [0, 1]) {
      for (const key of ['actor/pg_loss', 'critic/vf_loss', 'critic/score/mean', 'critic/advantages/mean', 'actor/grad_norm']) {
        expect(remote.metrics[step][key], `${key} at step ${step + 1}`).toBeCloseTo(local.metrics[step][key], 5);
      }
      // The servers' log-probs (the same decode kernels as the in-process sampler) against the trainer's recompute.
      expect(Math.abs(remote.metrics[step]['rollout_corr/kl'])).toBeLessThan(1e-4);
      expect(remote.metrics[step]['rollout_servers/staleness']).toBe(0);
    }
    // (b) every server loaded v0 then v1 from the shared directory, and the probe matched after each load.
    for (const s of servers) expect(s.loads.map((p) => p.split('/').pop())).toEqual(['v0', 'v1']);
    // 4 prompts × 2 steps, and each server's fingerprint probe after each of its 2 loads.
    expect(servers[0].generateRequests + servers[1].generateRequests).toBe(8 + 4);
    expect(Math.min(servers[0].generateRequests, servers[1].generateRequests)).toBeGreaterThan(0);
    for (const step of [0, 1]) expect(remote.metrics[step]['rollout_servers/fingerprint_max_gap']).toBeLessThan(1e-3);
  });

  it('mode=async: step 2 trains on the batch generated with step 1\'s weights during step 1\'s update', async () => {
    const overlap = await train('async', [...serverKeys(), 'actor_rollout_ref.rollout.mode=async']);
    expect(overlap.code, overlap.stderr).toBe(0);
    expect(overlap.metrics.map((m) => m['rollout_servers/staleness'])).toEqual([0, 1]);
    // Step 2's old log-probs are recomputed with step 2's weights; the servers sampled with step 1's: they drift.
    expect(Math.abs(overlap.metrics[1]['rollout_corr/kl'])).toBeGreaterThan(1e-5);
  });

  it('a server that refuses the weight load stops the run before any update, naming it', async () => {
    const refusing = createServer(async (req, res) => {
      for await (const _ of req) { /* drain */ }
      const answer = req.url === '/get_model_info' ? { model_path: 'x' } : { success: false, message: 'Failed to load weights: shape mismatch' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
    await new Promise<void>((done) => refusing.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
    try {
      const runDir = join(run.root, 'refused');
      // main() throws; train.js prints the message as its one line (ppo/run/user-error.ts) and exits non-zero.
      const failure = runCli([...run.overrides, ...COMMON, `trainer.default_local_dir=${runDir}`, 'trainer.save_freq=1',
        'actor_rollout_ref.rollout.name=sglang', `actor_rollout_ref.rollout.server_urls=[${servers[0].url},${url}]`]);
      await expect(failure).rejects.toThrow(new RegExp(`^${url}/update_weights_from_disk: malformed answer, expected success: true, got success: false \\(Failed to load weights: shape mismatch\\)$`));
      expect((await readdir(runDir)).filter((n) => n.startsWith('global_step_'))).toEqual([]);
    } finally {
      await new Promise((done) => { refusing.closeAllConnections(); refusing.close(done); });
    }
  });

  it('publishing: one complete directory per version, the two newest kept, vLLM\'s current link on the newest; LoRA publishes the adapter only', async () => {
    const engine = engines[0];
    const model = await loadModel(engine, join(run.root, 'model'));
    const config = loadConfig({ overrides: run.overrides });
    const dir = join(run.root, 'published');
    const full = diskWeightsPublisher(dir, 'vllm', { engine, actor: model, config, tokenizerFiles: { 'tokenizer.json': '{}' } });
    for (const version of [0, 1, 2]) expect(await full.publish(version)).toEqual({ version, dir: join(dir, `v${version}`), kind: 'full' });
    expect((await readdir(dir)).sort()).toEqual(['current', 'v1', 'v2']);
    expect(await readlink(join(dir, 'current'))).toBe('v2');
    expect((await readdir(join(dir, 'v2'))).sort()).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json']);
    const settings = { rank: 2, alpha: 4, targetModules: resolveTargetModules(['all-linear'], null, 'target_modules'), useRslora: false };
    const lora = new LoraAdapters(engine, model.config, settings, initialLoraValues(model.config, settings, 1), 'publish-lora');
    const adapter = diskWeightsPublisher(join(run.root, 'published-lora'), 'sglang', { engine, actor: { ...model, lora }, config, tokenizerFiles: {} });
    expect(await adapter.publish(4)).toMatchObject({ kind: 'lora' });
    expect((await readdir(join(run.root, 'published-lora', 'v4'))).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
  });

  it('two `node serve.js` processes: 2 steps, each loads each step\'s weights and passes the fingerprint', async () => {
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const children: ChildProcess[] = [];
    try {
      const urls = await Promise.all([0, 1].map(() => new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, ['serve.js', '--model', join(run.root, 'model'), '--port', '0'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
        children.push(child);
        let stdout = '', stderr = '';
        child.stderr!.on('data', (d) => (stderr += d));
        child.stdout!.on('data', (d) => {
          stdout += d;
          const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
          if (m) resolve(m[1]);
        });
        child.on('exit', (code) => reject(new Error(`serve.js exited with ${code}: ${stderr}`)));
      })));
      const remote = await train('serve-js', ['actor_rollout_ref.rollout.name=sglang', `actor_rollout_ref.rollout.server_urls=[${urls.join(',')}]`]);
      expect(remote.code, remote.stderr).toBe(0);
      for (const step of [0, 1]) {
        expect(remote.metrics[step]['rollout_servers/fingerprint_max_gap']).toBeLessThan(1e-3);
        expect(remote.metrics[step]['rollout_servers/live']).toBe(2);
        expect(Math.abs(remote.metrics[step]['rollout_corr/kl'])).toBeLessThan(1e-4);
      }
      expect((await readdir(join(remote.runDir, 'rollout_weights'))).sort()).toEqual(['v0', 'v1']);
    } finally {
      for (const child of children) child.kill('SIGTERM');
    }
  });
});
