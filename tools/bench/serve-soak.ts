// `node tools/bench.js serve-soak [--requests=10000] [--in-flight=16]`: one `node serve.js` on loopback under a long
// bounded load, as a trainer and its users load it: greedy /generate requests from 64 fixed prompts of 2-24 tokens
// with mixed lengths (1, 4, 16 or 48 new tokens), at most --in-flight at once; every 25th request aborted by its
// client 0-20 ms after it was sent; every 1,000 requests the weights swapped (/update_weights_from_disk) between two
// models. Checked on every answer: HTTP 200, completion_tokens = output_ids.length ≤ max_new_tokens, and greedy
// decoding's own truth — under one set of weights, the answers to one prompt are prefixes of each other whatever the
// batch they shared, the slot or the cache rows a previous (or aborted) request left. Reported every 1,000 requests:
// the server's resident set (its worker process's VmRSS) and the requests per second; the slope of the resident set
// after the first 2,000 requests says whether memory stays flat.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServeJs, type ServeProcess } from './serve-process.ts';
import { writeModelAndData } from './servers.ts';
import { integerFlag } from './harness.ts';

type Row = Record<string, string | number>;

const PROMPTS = 64;
const LENGTHS = [1, 4, 16, 48];
const ABORT_EVERY = 25;
const SWAP_EVERY = 1000;
const REPORT_EVERY = 1000;

/** A small deterministic generator: the same prompts and request mix on every run. */
function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/**
 * The resident set of the process that serves, in MB: serve.js's worker child, or serve.js itself when it runs
 * unfiltered (started from a process that is itself a filtered worker, as this benchmark is).
 */
function serverRssMb(server: ServeProcess): number {
  let pid = server.child.pid!;
  try {
    pid = Number(
      execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
        .trim()
        .split('\n')[0],
    );
  } catch {
    // ps exits 1 when it lists no child: serve.js serves in its own process.
  }
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

/** Whether one of `a` and `b` is a prefix of the other. */
const prefixes = (a: readonly number[], b: readonly number[]) =>
  (a.length <= b.length ? a : b).every((t, i) => t === (a.length <= b.length ? b : a)[i]);

export async function benchmarkServeSoak(argv: string[]): Promise<Row[]> {
  const requests = integerFlag(argv, 'requests', 10_000);
  const inFlight = integerFlag(argv, 'in-flight', 16);
  const dir = mkdtempSync(join(tmpdir(), 'bench-serve-soak-'));
  let server: ServeProcess | undefined;
  try {
    const models = [
      (await writeModelAndData(join(dir, 'a'), 5)).model,
      (await writeModelAndData(join(dir, 'b'), 6)).model,
    ];
    server = await startServeJs(models[0], ['--max-slots', String(inFlight)]);
    const url = server.url;
    const random = lcg(7);
    const prompts = Array.from({ length: PROMPTS }, () =>
      Array.from({ length: 2 + Math.floor(random() * 23) }, () => 3 + Math.floor(random() * 17)),
    );
    /** The longest answer seen per weights version and prompt. */
    const longest = new Map<string, number[]>();
    let version = 0;
    let sent = 0;
    let answered = 0;
    let aborted = 0;
    let tokens = 0;
    const failures: string[] = [];
    const rows: Row[] = [];
    const started = performance.now();
    let windowStart = started;

    const one = async (i: number): Promise<void> => {
      const p = i % PROMPTS;
      const maxNew = LENGTHS[Math.floor(random() * LENGTHS.length)];
      const abort = i % ABORT_EVERY === ABORT_EVERY - 1 ? new AbortController() : null;
      if (abort) setTimeout(() => abort.abort(), Math.floor(random() * 20));
      const servedBy = version;
      try {
        const response = await fetch(`${url}/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            input_ids: prompts[p],
            sampling_params: { temperature: 0, max_new_tokens: maxNew },
          }),
          signal: abort?.signal,
        });
        const text = await response.text();
        if (response.status !== 200) {
          failures.push(`request ${i}: HTTP ${response.status} ${text.slice(0, 120)}`);
          return;
        }
        const answer = JSON.parse(text) as { output_ids: number[]; meta_info: { completion_tokens: number } };
        const ids = answer.output_ids;
        if (answer.meta_info.completion_tokens !== ids.length || ids.length > maxNew)
          failures.push(`request ${i}: ${ids.length} tokens, completion_tokens ${answer.meta_info.completion_tokens}`);
        const key = `${servedBy}:${p}`;
        const before = longest.get(key);
        if (before && !prefixes(before, ids))
          failures.push(`request ${i} (prompt ${p}, weights ${servedBy}): [${ids}] disagrees with [${before}]`);
        if (!before || ids.length > before.length) longest.set(key, ids);
        answered++;
        tokens += ids.length;
      } catch (err) {
        if (abort?.signal.aborted) aborted++;
        else failures.push(`request ${i}: ${(err as Error).message}`);
      }
    };

    const running = new Set<Promise<void>>();
    while (sent < requests) {
      if (sent > 0 && sent % SWAP_EVERY === 0) {
        // Weight updates are barriers on the server: no request of the new version is sent before this one answers.
        await Promise.all(running);
        version = 1 - version;
        const swap = await fetch(`${url}/update_weights_from_disk`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model_path: models[version] }),
        });
        if (swap.status !== 200) failures.push(`weight update ${sent / SWAP_EVERY}: HTTP ${swap.status}`);
      }
      const request = one(sent++).finally(() => running.delete(request));
      running.add(request);
      if (running.size >= inFlight) await Promise.race(running);
      if (sent % REPORT_EVERY === 0) {
        await Promise.all(running);
        const now = performance.now();
        rows.push({
          requests: sent,
          answered,
          aborted,
          failures: failures.length,
          'rss MB': Number(serverRssMb(server).toFixed(1)),
          'requests/s': Number((REPORT_EVERY / ((now - windowStart) / 1000)).toFixed(1)),
          load: Number(loadavg()[0].toFixed(1)),
        });
        windowStart = now;
      }
    }
    await Promise.all(running);
    const rss = rows.slice(2).map((r) => r['rss MB'] as number);
    const slope =
      rss.length >= 2 ? ((rss[rss.length - 1] - rss[0]) / ((rows.length - 3) * REPORT_EVERY)) * 1000 : Number.NaN;
    for (const failure of failures.slice(0, 10)) console.error(failure);
    console.log(
      `${requests} requests in ${((performance.now() - started) / 1000).toFixed(0)} s: ${answered} answered ` +
        `(${tokens} tokens), ${aborted} aborted by their client, ${failures.length} failures; resident set after ` +
        `${2 * REPORT_EVERY} requests ${rss[0]} → ${rss.at(-1)} MB (${slope.toFixed(2)} MB per 1,000 requests)`,
    );
    if (failures.length > 0) process.exitCode = 1;
    return rows;
  } finally {
    server?.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}
