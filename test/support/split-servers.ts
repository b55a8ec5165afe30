// stories260K served in this process (ModelHost + ServeHttp, what serve.js runs) twice: on the shared test engine
// and on an engine whose binding is `bindingBytes`, for tests that a split server (chunked prefill, logits windows,
// prompt scores from the prefill) answers as the unsplit one does.
import { expect } from 'vitest';
import { Engine, readKnobs } from '../../engine/index.ts';
import { ModelHost, type ServeOptions } from '../../ppo/serving/model-host-node.ts';
import { ServeHttp } from '../../ppo/serving/http-server-node.ts';
import { fixturePath } from './fixtures.ts';
import { gpuEngine } from './gpu-engine.ts';

export interface Served {
  engine: Engine;
  host: ModelHost;
  http: ServeHttp;
  url: string;
}

async function serve(engine: Engine, options: Omit<ServeOptions, 'modelDir'>): Promise<Served> {
  const host = await ModelHost.open(engine, { ...options, modelDir: fixturePath('hf/stories260K') });
  const http = new ServeHttp(host, () => {}, 'test');
  const port = await http.listen(0, '127.0.0.1');
  return { engine, host, http, url: `http://127.0.0.1:${port}` };
}

/** The unsplit and the split server; `close` stops both and destroys the split one's engine (the shared one stays). */
export async function splitServers(
  options: Omit<ServeOptions, 'modelDir'>,
  bindingBytes: number,
): Promise<{ whole: Served; split: Served; close: () => Promise<void> }> {
  const whole = await serve(await gpuEngine(), options);
  const split = await serve(await Engine.create({ ...readKnobs(), maxBindingBytes: bindingBytes }), options);
  const close = async () => {
    for (const s of [whole, split]) {
      await s.http.close();
      s.host.destroy();
    }
    split.engine.destroy();
  };
  return { whole, split, close };
}

/** POSTs `body` as JSON to `path`, expects 200 and gives the response's JSON. */
export async function postJson(s: Served, path: string, body: unknown): Promise<any> {
  const res = await fetch(s.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await res.json();
  expect(res.status, JSON.stringify(json)).toBe(200);
  return json;
}
