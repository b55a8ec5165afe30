// `node tools/retrieval-server.js [--corpus FILE.jsonl] [--seed N] [--host H] [--port P]`: a stand-in for Search-R1's
// retrieval server (search_r1/search/retrieval_server.py) that answers its POST /retrieve protocol with this
// project's BM25. It serves a JSONL corpus, or by default the built-in search_qa task's corpus drawn with data.seed N
// (default 1, the trainer's), so `node train.js --config examples/search_r1_tiny.yaml retriever.url=…` runs against
// a real HTTP server with the documents the in-process BM25 would have returned.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Bm25Retriever } from '../ppo/environments/search/bm25-retriever.ts';
import { loadCorpus } from '../ppo/environments/search/corpus-node.ts';
import type { Retriever } from '../ppo/environments/search/retriever.ts';
import { syntheticQaDataset } from '../ppo/tasks/synthetic-qa.ts';

const USAGE = 'usage: node tools/retrieval-server.js [--corpus FILE.jsonl | --seed N] [--host 127.0.0.1] [--port 8000]';

class BadRequest extends Error {}

function parseRequest(body: string): { queries: string[]; topk: number; returnScores: boolean } {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    throw new BadRequest('the body is not JSON; expected {"queries": [string, ...], "topk": k, "return_scores": bool}');
  }
  const request = json as { queries?: unknown; topk?: unknown; return_scores?: unknown };
  if (!Array.isArray(request.queries) || !request.queries.every((q) => typeof q === 'string')) {
    throw new BadRequest(`"queries" must be a list of strings, got ${JSON.stringify(request.queries)}`);
  }
  const topk = request.topk ?? 3;
  if (!Number.isInteger(topk) || (topk as number) < 1)
    throw new BadRequest(`"topk" must be a positive integer, got ${JSON.stringify(topk)}`);
  return { queries: request.queries, topk: topk as number, returnScores: request.return_scores === true };
}

/** Serves `retriever` at POST /retrieve; every other path is 404, a malformed request 400 naming the problem. */
export function createRetrievalServer(retriever: Retriever): Server {
  const reply = (res: ServerResponse, status: number, payload: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(payload));
  };
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST' || req.url !== '/retrieve') {
      reply(res, 404, { error: `${req.method} ${req.url}: this server answers POST /retrieve` });
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', async () => {
      try {
        const { queries, topk, returnScores } = parseRequest(body);
        const results = await retriever.search(queries, topk);
        reply(res, 200, {
          result: results.map((docs) =>
            docs.map(({ id, contents, score }) =>
              returnScores ? { document: { id, contents }, score } : { id, contents },
            ),
          ),
        });
      } catch (err) {
        reply(res, err instanceof BadRequest ? 400 : 500, { error: (err as Error).message });
      }
    });
  });
}

function parseArgs(argv: string[]): { corpus: string | null; seed: number; host: string; port: number } {
  const options = { corpus: null as string | null, seed: 1, host: '127.0.0.1', port: 8000 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value (${USAGE})`);
    if (flag === '--corpus') options.corpus = value;
    else if (flag === '--host') options.host = value;
    else if (flag === '--seed' || flag === '--port') {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) throw new Error(`${flag} must be a non-negative integer, got ${value}`);
      options[flag === '--seed' ? 'seed' : 'port'] = n;
    } else throw new Error(`unknown option ${flag} (${USAGE})`);
  }
  return options;
}

/** Runs until killed; returns an exit code only when it cannot start. */
export async function runRetrievalServer(argv: string[]): Promise<number | null> {
  let options: ReturnType<typeof parseArgs>;
  try {
    options = parseArgs(argv);
  } catch (err) {
    console.error((err as Error).message);
    return 2;
  }
  const documents =
    options.corpus !== null
      ? await loadCorpus(options.corpus)
      : syntheticQaDataset({ seed: options.seed, valSize: 0 }).corpus;
  const source = options.corpus ?? `built-in search_qa corpus, data.seed ${options.seed}`;
  const server = createRetrievalServer(new Bm25Retriever(documents, { source }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, resolve);
  });
  const { address, port } = server.address() as AddressInfo;
  console.log(`BM25 over ${documents.length} documents (${source}) at http://${address}:${port}/retrieve`);
  return null;
}
