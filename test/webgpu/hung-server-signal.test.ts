// Signals beat a hung rollout server: `node train.js` with one `node serve.js` behind a loopback proxy that stops
// answering after the first step (as a SIGSTOP'd or wedged server does). SIGTERM then aborts the call under way at
// once, instead of waiting out server_timeout_s: the weights are untouched, so the last completed step is saved,
// the run says so and exits 143.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
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
    expect(performance.now() - signalled).toBeLessThan(20_000);
    const steps = (await runMetrics(dir)).length;
    expect(steps).toBeGreaterThan(0);
    const checkpoint = join(dir, `global_step_${steps}`);
    expect((await stat(checkpoint)).isDirectory()).toBe(true);
    expect(stderr).toContain(`interrupted by SIGTERM after step ${steps}: checkpoint ${checkpoint}`);
    expect(stderr).not.toMatch(/no answer within/);
  });
});
