// A fresh start (trainer.resume_mode=disable) whose rollout server is down stops before it touches the run directory:
// the previous run is not moved aside. Signals beat a hung rollout server: `node train.js` with one `node serve.js`
// behind a loopback proxy that stops answering after the first step (as a SIGSTOP'd or wedged server does). SIGTERM
// then aborts the call under way at once, instead of waiting out server_timeout_s: the weights are untouched, so the
// last completed step is saved, the run says so and exits 143.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { runCli } from '../support/run-cli.ts';
import { startServeJs, type ServeProcess } from '../../tools/bench/serve-process.ts';
import { sleep } from '../support/processes.ts';

const TRAIN_JS = fileURLToPath(new URL('../../train.js', import.meta.url));

let server: ServeProcess | undefined;
let proxy: Server | undefined;

afterAll(() => {
  server?.child.kill('SIGTERM');
  proxy?.closeAllConnections();
  proxy?.close();
});

/** Forwards every request to `target` until hang() is called; from then on, takes requests and never answers. */
async function hangingProxy(target: string): Promise<{ url: string; hang: () => void; hung: () => number }> {
  const to = new URL(target);
  let hanging = false;
  let hung = 0;
  proxy = createServer((req, res) => {
    if (hanging) {
      hung++;
      return;
    }
    const forwarded = request(
      { host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(forwarded);
  });
  await new Promise<void>((done) => proxy!.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    hang: () => (hanging = true),
    hung: () => hung,
  };
}

describe('signals beat a hung rollout server', () => {
  it('SIGTERM while the server hangs aborts the call at once, saves the last completed step and exits 143', {
    timeout: 300_000,
  }, async () => {
    const tiny = await makeTinyRun(8);
    server = await startServeJs(join(tiny.root, 'model'));
    const { url, hang, hung } = await hangingProxy(server.url);
    const dir = join(tiny.root, 'run');
    const child = spawn(
      process.execPath,
      [
        TRAIN_JS,
        ...tiny.overrides,
        'actor_rollout_ref.rollout.name=sglang',
        `actor_rollout_ref.rollout.server_urls=[${url}]`,
        'actor_rollout_ref.rollout.server_timeout_s=200',
        'trainer.total_training_steps=50',
        `trainer.default_local_dir=${dir}`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr!.on('data', (c) => (stderr += c));
    const exit = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    while ((await readFile(join(dir, 'metrics.jsonl'), 'utf8').catch(() => '')).trim() === '') await sleep(50);
    hang();
    while (hung() === 0) await sleep(50);
    const signalled = performance.now();
    child.kill('SIGTERM');
    expect(await exit).toBe(143);
    // Not after server_timeout_s=200 (no "no answer within" below); the bound leaves a loaded machine time to save.
    expect(performance.now() - signalled).toBeLessThan(100_000);
    const steps = (await runMetrics(dir)).length;
    expect(steps).toBeGreaterThan(0);
    const checkpoint = join(dir, `global_step_${steps}`);
    expect((await stat(checkpoint)).isDirectory()).toBe(true);
    expect(stderr).toContain(`interrupted by SIGTERM after step ${steps}: checkpoint ${checkpoint}`);
    expect(stderr).not.toMatch(/no answer within/);
  });

  it('resume_mode=disable with a server that is down: refused naming the URL, the previous run left as it was', async () => {
    const tiny = await makeTinyRun(8);
    const dir = join(tiny.root, 'used');
    await mkdir(dir, { recursive: true });
    const previous = '{"step":1,"data":{"actor/pg_loss":1}}\n';
    await writeFile(join(dir, 'metrics.jsonl'), previous);
    const closed = await new Promise<string>((done) => {
      const probe = createServer();
      probe.listen(0, '127.0.0.1', () => {
        const port = (probe.address() as AddressInfo).port;
        probe.close(() => done(`http://127.0.0.1:${port}`));
      });
    });
    const run = runCli([
      ...tiny.overrides,
      'actor_rollout_ref.rollout.name=sglang',
      `actor_rollout_ref.rollout.server_urls=[${closed}]`,
      'actor_rollout_ref.rollout.server_max_retries=0',
      'trainer.resume_mode=disable',
      `trainer.default_local_dir=${dir}`,
    ]);
    await expect(run).rejects.toThrow(
      new RegExp(`^${closed.replace(/[.:/]/g, '\\$&')}/get_model_info: connection refused`),
    );
    expect(await readdir(dir)).toEqual(['metrics.jsonl']);
    expect(await readFile(join(dir, 'metrics.jsonl'), 'utf8')).toBe(previous);
  });
});
