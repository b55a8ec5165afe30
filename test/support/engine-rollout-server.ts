// A loopback rollout server for trainer tests: this engine's in-process rollout behind SGLang's /get_model_info,
// /update_weights_from_disk and /generate (return_logprob), one request at a time. It stands in for `node serve.js` in tests until that server is merged; it counts the loads it accepted.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Engine } from '../../engine/index.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';

export interface EngineRolloutServer {
  url: string;
  /** model_path of every accepted /update_weights_from_disk. */
  loads: string[];
  generateRequests: number;
  close(): Promise<void>;
}

export async function startEngineRolloutServer(engine: Engine, modelDir: string): Promise<EngineRolloutServer> {
  let model = await loadModel(engine, modelDir);
  let modelPath = modelDir;
  let generator = new RolloutGenerator(engine, model);
  let queue: Promise<unknown> = Promise.resolve();
  const state = { loads: [] as string[], generateRequests: 0 };
  const handle = async (path: string, body: Record<string, unknown> | null): Promise<unknown> => {
    if (path === '/get_model_info') return { model_path: modelPath };
    if (path === '/update_weights_from_disk') {
      const next = await loadModel(engine, String(body!.model_path));
      generator.destroy();
      model = next;
      modelPath = String(body!.model_path);
      generator = new RolloutGenerator(engine, model);
      state.loads.push(modelPath);
      return { success: true, message: 'Succeeded to update model weights.' };
    }
    if (path !== '/generate') throw new Error(`no route ${path}`);
    state.generateRequests++;
    const rows = body!.input_ids as number[][];
    const s = body!.sampling_params as Record<string, number & number[]>;
    const batch = await generator.generate([rows[0]], {
      n: rows.length, temperature: s.temperature, topK: s.top_k, topP: s.top_p, maxResponseLength: s.max_new_tokens,
      eosTokenIds: s.stop_token_ids, padTokenId: 0, seed: s.sampling_seed,
    });
    return batch.responses.map((response, i) => {
      const length = batch.responseLengths[i];
      return {
        output_ids: response.slice(0, length),
        meta_info: {
          finish_reason: batch.finishReasons[i] === 'length' ? { type: 'length', length } : { type: 'stop', matched: response[length - 1] },
          output_token_logprobs: response.slice(0, length).map((id, t) => [batch.oldLogProbs[i][t], id, null]),
        },
      };
    });
  };
  const server: Server = createServer(async (req, res) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    // One request at a time: the engine's buffers are not shared between concurrent generations here.
    const answer = queue.then(() => handle(req.url ?? '', text ? JSON.parse(text) : null));
    queue = answer.catch(() => undefined);
    try {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(await answer));
    } catch (err) {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: (err as Error).message } }));
    }
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get loads() { return state.loads; },
    get generateRequests() { return state.generateRequests; },
    close: async () => {
      await new Promise((done) => { server.closeAllConnections(); server.close(done); });
      await queue;
      generator.destroy();
    },
  };
}
