// stories260K served in this process (ModelHost + ServeHttp, what serve.js runs) twice: on the shared test engine
// and on an engine whose binding is `bindingBytes`, for tests that a split server (chunked prefill, logits windows,
// prompt scores from the prefill) answers as the unsplit one does.
import { afterAll, beforeAll, expect } from 'vitest';
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

// What the suites' servers share; each sets its shape (prompt and answer lengths, slots) and may override these.
const STORIES_SERVE = {
  servedModelName: 'stories',
  gpuMemoryUtilization: 0.5,
  maxLogprobs: 20,
  dtype: 'auto',
  kvCacheDtype: 'auto',
} as const;

export type SplitServeOptions = Pick<
  ServeOptions,
  'maxPromptTokens' | 'maxNewTokens' | 'maxSlots' | 'maxRequestSamples'
> &
  Partial<Omit<ServeOptions, 'modelDir'>>;

/**
 * The unsplit and the split server, started before the suite's tests and stopped after them (the split one's engine
 * destroyed; the shared one stays): read `whole` and `split` inside the tests.
 */
export function splitServersForSuite(
  options: SplitServeOptions,
  bindingBytes: number,
): { whole: Served; split: Served } {
  const served = {} as { whole: Served; split: Served };
  beforeAll(async () => {
    const all = { ...STORIES_SERVE, ...options };
    served.whole = await serve(await gpuEngine(), all);
    served.split = await serve(await Engine.create({ ...readKnobs(), maxBindingBytes: bindingBytes }), all);
  });
  afterAll(async () => {
    for (const s of [served.whole, served.split]) {
      await s.http.close();
      s.host.destroy();
    }
    served.split.engine.destroy();
  });
  return served;
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
