// `node tools/bench.js servers [--steps=4]`: the trainer (`node train.js`, GRPO on the arithmetic task, a fresh
// 3-layer Qwen3-style model, 16 prompts × n=4, 16 new tokens) with its rollouts in-process, on 1 and on 2
// `node serve.js` processes, and with overlap (rollout.mode=async) on 2, all in one run on the same machine.
// Per setup: the median over steps 2… (step 1 compiles pipelines) of the generation time (timing_s/gen: with
// overlap only the wait for the batch generated during the last update), the step time, generated tokens per
// second of generation, and each as a ratio to in-process from this run; the servers' own /metrics give the
// tokens each generated. The load average is reported: on a shared machine the ratios are what it could show.
// `node tools/bench.js servers --serve-throughput[=C]` measures the server alone instead: the same prompts
// generated in this process (the trainer's RolloutGenerator, one batch) and through one `node serve.js` with C
// requests in flight (default 32, one sample each, --max-slots C), alternated, and the ratio of their tokens/s;
// with each side's decode steps, rows per step, prefill groups and CPU time per 1,000 tokens (the server's process
// and this one, the client: on a shared machine the CPU time varies less than the wall time), split into the main
// (JavaScript) thread's and the other threads' (on lavapipe, the device's own work). The client's CPU is reported
// apart too: here it shares the cores with the server, where a trainer's would run on a machine of its own. The
// bench's random model ends most answers on EOS after ~26 tokens; `--answer-tokens=N` makes every answer N tokens
// long on both sides (ignore_eos, max N new tokens), as long as rollouts' and served answers usually are;
// `--rounds=N` alternates N rounds (default 15: a round is ~0.3 s, and the median of 5 moved ±0.05 run to run);
// `--client=fetch` sends the requests with fetch (undici) instead of node:http (twice the client's CPU).
import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../../engine/index.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { initialParameters } from '../../models/init.ts';
import { saveModel } from '../../models/model-files-node.ts';
import { arithmeticDataset, arithmeticTokenizer, arithmeticTokenizerFiles } from '../../ppo/tasks/arithmetic.ts';
import { counterValue } from '../../ppo/serving/counters.ts';
import { integerFlag, median } from './harness.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { readGenerationConfig } from '../../models/checkpoint-io-node.ts';
import { loadTokenizer } from '../../models/tokenizer-node.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import { endTokenIds } from '../../ppo/generation/types.ts';
import { processTreeCpuMs, startServeJs, type ServeProcess } from './serve-process.ts';

const TRAIN_JS = fileURLToPath(new URL('../../train.js', import.meta.url));
const PROMPTS = 16;
const SAMPLES_PER_PROMPT = 4;
const NEW_TOKENS = 16;
const PROMPT_TOKENS = 16;

type Row = Record<string, string | number>;

/**
 * A fresh model (the built-in model's shape, initialised from `seed`) and the arithmetic task's training file, as HF
 * files on disk.
 */
export async function writeModelAndData(dir: string, seed = 5): Promise<{ model: string; data: string }> {
  const engine = await Engine.create();
  const model = join(dir, 'model');
  try {
    const config = tinyQwen3Config(arithmeticTokenizer.vocabSize);
    const params = createParameterArena(engine, config, 'bench-servers');
    uploadArenaTensors(engine, params, initialParameters(config, seed));
    await saveModel(engine, model, config, params);
  } finally {
    engine.destroy();
  }
  const files = arithmeticTokenizerFiles();
  await writeFile(join(model, 'tokenizer.json'), JSON.stringify(files.tokenizerJson));
  await writeFile(join(model, 'tokenizer_config.json'), JSON.stringify(files.tokenizerConfig));
  const data = join(dir, 'train.jsonl');
  await writeFile(
    data,
    `${arithmeticDataset({ digits: 2, trainSize: 256, valSize: 0, seed: 3 })
      .train.map((r) => JSON.stringify(r.row))
      .join('\n')}\n`,
  );
  return { model, data };
}

/** POSTs a JSON body and resolves with the JSON answer; an answer other than 200 rejects with its body. */
type JsonPost = (url: string, body: object) => Promise<unknown>;

/** The throughput bench's client with fetch (undici): ~2x the CPU per request of node:http's on loopback. */
const fetchPost: JsonPost = async (url, body) => {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`servers bench: ${url} answered ${res.status}: ${await res.text()}`);
  return res.json();
};

/**
 * The throughput bench's default client: node:http with a keep-alive connection per request in flight, half the
 * CPU per request of fetch's (the client shares the cores with the server it measures).
 */
function httpPost(connections: number): JsonPost {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  return (url, body) =>
    new Promise((resolve, reject) => {
      const data = JSON.stringify(body);
      const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) };
      const req = request(url, { method: 'POST', agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) reject(new Error(`servers bench: ${url} answered ${res.statusCode}: ${text}`));
          else resolve(JSON.parse(text));
        });
      });
      req.on('error', reject);
      req.end(data);
    });
}

/** Tokens each server has generated since it started (its /metrics). */
async function serverTokens(servers: readonly ServeProcess[]): Promise<number[]> {
  return Promise.all(
    servers.map(async (s) => counterValue(await (await fetch(`${s.url}/metrics`)).text(), 'generation_tokens_total')),
  );
}

/** Requests per alternation of the throughput bench, and the new tokens each asks for by default (most end earlier, on
 * EOS). */
const THROUGHPUT_REQUESTS = 64;
const THROUGHPUT_NEW_TOKENS = 64;
const THROUGHPUT_ROUNDS = 15;

/**
 * Generated tokens per second in this process (RolloutGenerator over every prompt, `concurrency` slots) and through
 * one serve.js with `concurrency` requests in flight, alternated `THROUGHPUT_ROUNDS` times after a warm-up of each.
 * `answerTokens`: every answer that long (no EOS ends it); null: up to THROUGHPUT_NEW_TOKENS, ended by EOS.
 */
async function benchmarkServeThroughput(
  model: string,
  concurrency: number,
  answerTokens: number | null,
  rounds: number,
  httpClient: 'http' | 'fetch',
): Promise<Row[]> {
  const newTokens = answerTokens ?? THROUGHPUT_NEW_TOKENS;
  const ignoreEos = answerTokens !== null;
  const prompts = arithmeticDataset({ digits: 2, trainSize: THROUGHPUT_REQUESTS, valSize: 0, seed: 4 }).train.map(
    (r) => (r.row.prompt as { content: string }[])[0].content,
  );
  const engine = await Engine.create();
  const server = await startServeJs(model, [
    '--max-slots',
    String(concurrency),
    '--max-prompt-tokens',
    String(PROMPT_TOKENS),
    '--max-new-tokens',
    String(newTokens),
  ]);
  try {
    const loaded = await loadModel(engine, model);
    const tokenizer = await loadTokenizer(model);
    const end = endTokenIds(loaded.config, await readGenerationConfig(model), tokenizer);
    const ids = await Promise.all(prompts.map((p) => tokenizer.encode(p)));
    const generator = new RolloutGenerator(engine, { config: loaded.config, params: loaded.params });
    // Per side: decode steps and their rows, prefill groups, CPU ms (this process; for the server, its process too,
    // and of each the main thread's: JavaScript's) and tokens.
    const used = {
      in: { steps: 0, rowSteps: 0, prefills: 0, cpuMs: 0, mainMs: 0, tokens: 0 },
      served: { serverCpuMs: 0, serverMainMs: 0, clientCpuMs: 0, tokens: 0 },
    };
    const cpuMs = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    };
    const mainMs = (pid: number, descendants: boolean) => processTreeCpuMs(pid, descendants)?.main ?? Number.NaN;
    const serverCpuMs = () => processTreeCpuMs(server.child.pid!)?.all ?? Number.NaN;
    const inProcess = async (seed: number) => {
      const started = performance.now();
      const [cpu, main] = [cpuMs(), mainMs(process.pid, false)];
      const batch = await generator.generate(ids, {
        n: 1,
        temperature: 1,
        topK: -1,
        topP: 1,
        seed,
        maxSlots: concurrency,
        maxResponseLength: newTokens,
        ...end,
        ignoreEos,
        onDecodeStep: (rows) => {
          used.in.steps++;
          used.in.rowSteps += rows;
        },
        onPrefill: () => {
          used.in.prefills++;
        },
      });
      const tokens = batch.responseLengths.reduce((a, b) => a + b, 0);
      if (ignoreEos && tokens !== ids.length * newTokens)
        throw new Error(
          `servers bench: in-process answers of ${tokens / ids.length} tokens on average, not ${newTokens}`,
        );
      used.in.cpuMs += cpuMs() - cpu;
      used.in.mainMs += mainMs(process.pid, false) - main;
      used.in.tokens += tokens;
      return tokens / ((performance.now() - started) / 1000);
    };
    const post = httpClient === 'fetch' ? fetchPost : httpPost(concurrency);
    const served = async (seed: number) => {
      const started = performance.now();
      const [client, serverCpu, serverMain] = [cpuMs(), serverCpuMs(), mainMs(server.child.pid!, true)];
      let next = 0;
      let tokens = 0;
      const worker = async () => {
        for (let i = next++; i < ids.length; i = next++) {
          const res = await post(`${server.url}/generate`, {
            input_ids: ids[i],
            sampling_params: {
              temperature: 1,
              seed,
              sample_offset: i,
              max_new_tokens: newTokens,
              ...(ignoreEos ? { ignore_eos: true } : {}),
            },
          });
          const answer = (res as { output_ids: number[] }).output_ids.length;
          if (ignoreEos && answer !== newTokens)
            throw new Error(`servers bench: serve.js answered ${answer} tokens with ignore_eos, not ${newTokens}`);
          tokens += answer;
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      used.served.clientCpuMs += cpuMs() - client;
      used.served.serverCpuMs += serverCpuMs() - serverCpu;
      used.served.serverMainMs += mainMs(server.child.pid!, true) - serverMain;
      used.served.tokens += tokens;
      return tokens / ((performance.now() - started) / 1000);
    };
    const counters = async () => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      return ['decode_steps_total', 'decode_row_steps_total', 'prefills_total'].map((n) => counterValue(text, n));
    };
    await inProcess(1);
    await served(1);
    used.in = { steps: 0, rowSteps: 0, prefills: 0, cpuMs: 0, mainMs: 0, tokens: 0 };
    used.served = { serverCpuMs: 0, serverMainMs: 0, clientCpuMs: 0, tokens: 0 };
    const rates = { in: [] as number[], served: [] as number[] };
    const [steps0, rowSteps0, prefills0] = await counters();
    for (let round = 0; round < rounds; round++) {
      rates.in.push(await inProcess(10 + round));
      rates.served.push(await served(10 + round));
    }
    const [steps1, rowSteps1, prefills1] = await counters();
    const load = loadavg()[0];
    const inRate = median(rates.in);
    const servedRate = median(rates.served);
    const perThousand = (ms: number, tokens: number) => (1000 * ms) / tokens;
    const inCpu = perThousand(used.in.cpuMs, used.in.tokens);
    const servedCpu = perThousand(used.served.serverCpuMs + used.served.clientCpuMs, used.served.tokens);
    return [
      {
        generation: 'in-process (RolloutGenerator)',
        tokens_per_s: inRate,
        ratio: 1,
        load1: load,
        // Decode steps per round and the rows they decoded on average (what the batch held); prefill groups per round.
        decode_steps: used.in.steps / rounds,
        rows_per_step: used.in.rowSteps / used.in.steps,
        prefills: used.in.prefills / rounds,
        cpu_ms_per_1k_tokens: inCpu,
        main_thread_ms_per_1k: perThousand(used.in.mainMs, used.in.tokens),
        other_threads_ms_per_1k: perThousand(used.in.cpuMs - used.in.mainMs, used.in.tokens),
        client_ms_per_1k: '-',
        cpu_ratio: 1,
        server_cpu_ratio: 1,
      },
      {
        generation: `1 serve.js, ${concurrency} requests in flight`,
        tokens_per_s: servedRate,
        ratio: servedRate / inRate,
        load1: load,
        decode_steps: (steps1 - steps0) / rounds,
        rows_per_step: (rowSteps1 - rowSteps0) / (steps1 - steps0),
        prefills: (prefills1 - prefills0) / rounds,
        // The server's process and the client's (this one): in-process CPU per token over this.
        cpu_ms_per_1k_tokens:
          `${perThousand(used.served.serverCpuMs, used.served.tokens).toFixed(0)} + ` +
          `${perThousand(used.served.clientCpuMs, used.served.tokens).toFixed(0)}`,
        client_ms_per_1k: perThousand(used.served.clientCpuMs, used.served.tokens),
        // The server's alone (the client's is in the line above).
        main_thread_ms_per_1k: perThousand(used.served.serverMainMs, used.served.tokens),
        other_threads_ms_per_1k: perThousand(used.served.serverCpuMs - used.served.serverMainMs, used.served.tokens),
        cpu_ratio: inCpu / servedCpu,
        // Without the client's CPU: what a server whose clients run elsewhere would show.
        server_cpu_ratio: inCpu / perThousand(used.served.serverCpuMs, used.served.tokens),
      },
      {
        generation:
          `${THROUGHPUT_REQUESTS} prompts × ${answerTokens === null ? `≤ ${newTokens} new tokens (EOS ends most)` : `${newTokens} new tokens (ignore_eos)`} (temperature 1), ${concurrency} slots ` +
          `each; medians of ${rounds} alternated rounds after a warm-up; serve.js: ${server.slots} slots; ` +
          'CPU ms per 1,000 tokens over all rounds (served: server + client), of which the main (JavaScript) ' +
          "thread's and the other threads' (the device's, Dawn's, V8's; served: the server's); client_ms_per_1k: " +
          "the client's (this process's HTTP requests, on the same cores here); server_cpu_ratio: without it",
      },
    ];
  } finally {
    server.child.kill('SIGTERM');
    engine.destroy();
  }
}

export async function benchmarkServers(argv: string[]): Promise<Row[]> {
  const throughput = argv.find((a) => a.startsWith('--serve-throughput'));
  if (throughput !== undefined) {
    const concurrency = throughput.includes('=') ? Number(throughput.split('=')[1]) : 32;
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new Error(`${throughput}: expected --serve-throughput or --serve-throughput=C, C an integer ≥ 1`);
    const answerTokens = integerFlag(argv, 'answer-tokens', null, 1, "every answer's length");
    const rounds = integerFlag(argv, 'rounds', THROUGHPUT_ROUNDS);
    const client = argv.find((a) => a.startsWith('--client='))?.slice('--client='.length) ?? 'http';
    if (client !== 'http' && client !== 'fetch') throw new Error(`--client=${client}: expected http or fetch`);
    const dir = mkdtempSync(join(tmpdir(), 'bench-serve-throughput-'));
    try {
      const { model } = await writeModelAndData(dir);
      return await benchmarkServeThroughput(model, concurrency, answerTokens, rounds, client);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const steps = integerFlag(argv, 'steps', 4, 2, 'step 1 is the warm-up');
  const dir = mkdtempSync(join(tmpdir(), 'bench-servers-'));
  const servers: ServeProcess[] = [];
  try {
    const { model, data } = await writeModelAndData(dir);
    // Each server sized for the job, as one would launch it for this trainer: a step's samples in one batch, caches
    // as long as prompt + response (serve.js' defaults, 16 slots of 512 + 512 positions, decode 4 times slower here).
    const sized = [
      '--max-slots',
      String(PROMPTS * SAMPLES_PER_PROMPT),
      '--max-prompt-tokens',
      String(PROMPT_TOKENS),
      '--max-new-tokens',
      String(NEW_TOKENS),
    ];
    servers.push(...(await Promise.all([0, 1].map(() => startServeJs(model, sized)))));
    const common = [
      `actor_rollout_ref.model.path=${model}`,
      `data.train_files=${data}`,
      'algorithm.adv_estimator=grpo',
      `data.train_batch_size=${PROMPTS}`,
      `actor_rollout_ref.rollout.n=${SAMPLES_PER_PROMPT}`,
      'actor_rollout_ref.actor.ppo_mini_batch_size=8',
      `data.max_prompt_length=${PROMPT_TOKENS}`,
      `data.max_response_length=${NEW_TOKENS}`,
      'trainer.val_before_train=false',
      'trainer.test_freq=-1',
      'trainer.save_freq=-1',
      'trainer.logger=[file]',
      `trainer.total_training_steps=${steps}`,
    ];
    const on = (n: number) => [
      'actor_rollout_ref.rollout.name=sglang',
      `actor_rollout_ref.rollout.server_urls=[${servers
        .slice(0, n)
        .map((s) => s.url)
        .join(',')}]`,
    ];
    const setups: [string, number, string[]][] = [
      ['in-process', 0, []],
      ['1 serve.js', 1, on(1)],
      ['2 serve.js', 2, on(2)],
      ['2 serve.js, mode=async', 2, [...on(2), 'actor_rollout_ref.rollout.mode=async']],
    ];
    const rows: Row[] = [];
    for (const [name, count, keys] of setups) {
      const runDir = join(dir, `run-${rows.length}`);
      const before = await serverTokens(servers);
      const load = loadavg()[0];
      const code = await new Promise<number | null>((done) =>
        spawn(process.execPath, [TRAIN_JS, ...common, ...keys, `trainer.default_local_dir=${runDir}`], {
          stdio: ['ignore', 'ignore', 'inherit'],
        }).on('exit', done),
      );
      if (code !== 0) throw new Error(`servers bench (${name}): node train.js exited with ${code}`);
      const after = await serverTokens(servers);
      const timed = readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { step: number; data: Record<string, number> })
        .filter((r) => r.step >= 2 && 'timing_s/gen' in r.data)
        .map((r) => r.data);
      const tokens = median(timed.map((m) => m['response_length/mean'] * PROMPTS * SAMPLES_PER_PROMPT));
      const genS = median(timed.map((m) => m['timing_s/gen']));
      const stepS = median(timed.map((m) => m['timing_s/step']));
      const overlapped = keys.includes('actor_rollout_ref.rollout.mode=async');
      rows.push({
        rollout: name,
        gen_s: genS,
        step_s: stepS,
        sync_s: count === 0 ? '-' : median(timed.map((m) => m['timing_s/sync_rollout_weights'] ?? 0)),
        // With overlap timing_s/gen is the wait for a batch generated during the last update, not a generation rate.
        gen_tokens_per_s: overlapped ? '-' : tokens / genS,
        tokens_per_step: tokens,
        server_tokens:
          count === 0
            ? '-'
            : after
                .slice(0, count)
                .map((t, i) => t - before[i])
                .join('+'),
        load1: load,
      });
    }
    const base = rows[0];
    for (const row of rows) {
      row.gen_s_ratio = (row.gen_s as number) / (base.gen_s as number);
      row.step_s_ratio = (row.step_s as number) / (base.step_s as number);
    }
    rows.push({
      rollout:
        `medians of steps 2-${steps}; ratios to in-process of this run; load1: 1-min load average when the setup ` +
        `started; ` +
        `each serve.js: ${servers[0].slots} decode slots`,
    });
    return rows;
  } finally {
    for (const s of servers) s.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}
