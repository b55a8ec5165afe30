import { describe, it, expect, beforeAll, afterAll, beforeEach } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HttpRetriever } from '../../ppo/environments/search/http-retriever.ts';
import { Bm25Retriever } from '../../ppo/environments/search/bm25-retriever.ts';
import { formatDocuments } from '../../ppo/environments/search/format-documents.ts';
import { loadCorpus } from '../../ppo/environments/search/corpus-node.ts';
import type { CorpusDocument } from '../../ppo/environments/search/retriever.ts';
import { makeTempDirSync } from '../support/temp-dir.ts';

interface RecordedRequest {
  method: string;
  path: string;
  contentType: string | undefined;
  body: string;
}

type Handler = (body: { queries: string[]; topk: number }, res: ServerResponse, attempt: number) => void;

/** A retrieval server on 127.0.0.1; `handler` answers each request, `requests` records them. */
async function startServer(state: {
  handler: Handler;
  requests: RecordedRequest[];
}): Promise<{ server: Server; url: string }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      state.requests.push({
        method: req.method ?? '',
        path: req.url ?? '',
        contentType: req.headers['content-type'],
        body,
      });
      state.handler(JSON.parse(body), res, state.requests.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/retrieve` };
}

async function stopServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

function answer(res: ServerResponse, status: number, payload: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(payload));
}

/** Search-R1's return_scores=true shape: document i of query q is "{q}\ndoc {i}" with score 1/(i+1). */
const searchR1Answer: Handler = ({ queries, topk }, res) =>
  answer(res, 200, {
    result: queries.map((q) =>
      Array.from({ length: topk }, (_, i) => ({
        document: { id: `${q}-${i}`, contents: `${q}\ndoc ${i}` },
        score: 1 / (i + 1),
      })),
    ),
  });

describe('HttpRetriever (Search-R1 retrieval server protocol)', () => {
  const state: { handler: Handler; requests: RecordedRequest[] } = { handler: searchR1Answer, requests: [] };
  let server: Server;
  let url: string;

  beforeAll(async () => {
    ({ server, url } = await startServer(state));
  });
  afterAll(() => stopServer(server));
  beforeEach(() => {
    state.handler = searchR1Answer;
    state.requests = [];
  });

  it('POSTs the queries as JSON and reads documents and scores', async () => {
    const retriever = new HttpRetriever({ url });
    expect(retriever.description).toBe(url);
    const results = await retriever.search(['who wrote hamlet'], 2);
    expect(state.requests).toEqual([
      {
        method: 'POST',
        path: '/retrieve',
        contentType: 'application/json',
        body: '{"queries":["who wrote hamlet"],"topk":2,"return_scores":true}',
      },
    ]);
    expect(results).toEqual([
      [
        { id: 'who wrote hamlet-0', contents: 'who wrote hamlet\ndoc 0', score: 1 },
        { id: 'who wrote hamlet-1', contents: 'who wrote hamlet\ndoc 1', score: 0.5 },
      ],
    ]);
  });

  it('sends a batch of queries in one request and keeps their order', async () => {
    const results = await new HttpRetriever({ url }).search(['a', 'b', 'c'], 1);
    expect(state.requests.length).toBe(1);
    expect(results.map((docs) => docs.map((d) => d.id))).toEqual([['a-0'], ['b-0'], ['c-0']]);
  });

  it('accepts bare documents (return_scores=false shape), numeric ids and documents without id', async () => {
    state.handler = (_, res) =>
      answer(res, 200, {
        result: [
          [
            { id: 7, contents: 'T\nx' },
            { title: 'T', text: 'y', contents: 'T\ny' },
          ],
          [],
        ],
      });
    expect(await new HttpRetriever({ url }).search(['q', 'r'], 3)).toEqual([
      [
        { id: '7', contents: 'T\nx', score: null },
        { id: '', contents: 'T\ny', score: null },
      ],
      [],
    ]);
  });

  it('makes no request for no queries', async () => {
    expect(await new HttpRetriever({ url }).search([], 3)).toEqual([]);
    expect(state.requests.length).toBe(0);
  });

  it('retries HTTP 503 and 429 with back-off and then succeeds', async () => {
    state.handler = (body, res, attempt) =>
      attempt <= 2 ? answer(res, attempt === 1 ? 503 : 429, { detail: 'busy' }) : searchR1Answer(body, res, attempt);
    const started = performance.now();
    const results = await new HttpRetriever({ url, retryDelayMs: 20 }).search(['q'], 1);
    expect(results[0][0].id).toBe('q-0');
    expect(state.requests.length).toBe(3);
    expect(performance.now() - started).toBeGreaterThanOrEqual(20 + 40 - 5);
  });

  it('gives up on a server that never answers after maxRetries retries, naming the URL', async () => {
    state.handler = () => {};
    const retriever = new HttpRetriever({ url, timeoutMs: 200, maxRetries: 2, retryDelayMs: 5 });
    await expect(retriever.search(['q'], 1)).rejects.toThrow(
      `retriever ${url}: no answer after 3 attempts; last: no answer within 200 ms`,
    );
    expect(state.requests.length).toBe(3);
  });

  it('does not retry HTTP 400', async () => {
    state.handler = (_, res) => answer(res, 400, { detail: 'topk must be positive' });
    await expect(new HttpRetriever({ url, retryDelayMs: 1 }).search(['q'], 1)).rejects.toThrow(
      `retriever ${url}: HTTP 400 Bad Request: {"detail":"topk must be positive"} (not retried`,
    );
    expect(state.requests.length).toBe(1);
  });

  it('rejects malformed answers without retrying', async () => {
    const retriever = new HttpRetriever({ url, retryDelayMs: 1 });
    const cases: [unknown, string][] = [
      [{ result: [[]] }, 'answer has 1 result lists for 2 queries'],
      [{ results: [[], []] }, 'answer has no "result" list'],
      [{ result: [[{ document: { id: '1' }, score: 1 }], []] }, 'result 0 document 0 has no string "contents"'],
      [{ result: [[], [{ id: '1', contents: 5 }]] }, 'result 1 document 0 has no string "contents"'],
      [
        { result: [[], [{ document: { id: '1', contents: 'x' }, score: 'high' }]] },
        'result 1 document 0 has score "high", not a number',
      ],
      [
        {
          result: [
            [
              { id: '1', contents: 'x' },
              { id: '2', contents: 'y' },
            ],
            [],
          ],
        },
        'result 0 has 2 documents, more than topk=1',
      ],
      [{ result: [null, []] }, 'result 0 is null, not a list'],
    ];
    for (const [payload, message] of cases) {
      state.handler = (_, res) => answer(res, 200, payload);
      await expect(retriever.search(['q', 'r'], 1)).rejects.toThrow(`retriever ${url}: ${message}`);
    }
    state.handler = (_, res) => {
      res.writeHead(200);
      res.end('<html>oops</html>');
    };
    await expect(retriever.search(['q', 'r'], 1)).rejects.toThrow(
      `retriever ${url}: answer is not JSON: <html>oops</html>`,
    );
    expect(state.requests.length).toBe(cases.length + 1);
  });

  it('calls a given fetch unbound, as browsers require of window.fetch', async () => {
    const calls: unknown[] = [];
    const fetch = async function (this: unknown, input: string | URL | Request): Promise<Response> {
      calls.push(this, String(input));
      return new Response(JSON.stringify({ result: [[{ document: { id: 'x', contents: 'T\nx' }, score: 2 }]] }));
    };
    expect(await new HttpRetriever({ url: 'http://retriever.test/retrieve', fetch }).search(['q'], 1)).toEqual([
      [{ id: 'x', contents: 'T\nx', score: 2 }],
    ]);
    expect(calls).toEqual([undefined, 'http://retriever.test/retrieve']);
  });

  it('rejects a bad topk and a bad url before any request', async () => {
    await expect(new HttpRetriever({ url }).search(['q'], 0)).rejects.toThrow(
      `retriever ${url}: topk must be a positive integer, got 0`,
    );
    expect(() => new HttpRetriever({ url: '127.0.0.1:8000/retrieve' })).toThrow(/must be an http\(s\) URL/);
    expect(state.requests.length).toBe(0);
  });
});

describe('HttpRetriever without a server', () => {
  it('throws naming the URL, the attempts and the connection error', async () => {
    const { server, url } = await startServer({ handler: searchR1Answer, requests: [] });
    await stopServer(server);
    await expect(new HttpRetriever({ url, maxRetries: 1, retryDelayMs: 1 }).search(['q'], 1)).rejects.toThrow(
      new RegExp(`^retriever ${url}: no answer after 2 attempts; last: fetch failed: ECONNREFUSED$`),
    );
  });
});

// Independent BM25 as Lucene/Pyserini score it (k1=0.9, b=0.4, no (k1+1) factor), straight from the formula.
function bm25Scores(corpus: readonly string[], query: string): number[] {
  const tokenize = (text: string): string[] =>
    text
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter((t) => t !== '');
  const docs = corpus.map(tokenize);
  const avgdl = docs.reduce((sum, d) => sum + d.length, 0) / docs.length;
  return docs.map((doc) => {
    let score = 0;
    for (const term of tokenize(query)) {
      const df = docs.filter((d) => d.includes(term)).length;
      if (df === 0) continue;
      const tf = doc.filter((t) => t === term).length;
      const idf = Math.log(1 + (docs.length - df + 0.5) / (df + 0.5));
      score += (idf * tf) / (tf + 0.9 * (1 - 0.4 + (0.4 * doc.length) / avgdl));
    }
    return score;
  });
}

const CORPUS: CorpusDocument[] = [
  { id: 'd0', contents: '"Hamlet"\nHamlet is a tragedy by William Shakespeare, set in Denmark.' },
  { id: 'd1', contents: '"Macbeth"\nMacbeth is a tragedy by Shakespeare; Macbeth is a Scottish general.' },
  { id: 'd2', contents: '"Denmark"\nDenmark is a Nordic country. Copenhagen is the capital of Denmark.' },
  { id: 'd3', contents: '"Copenhagen"\nCopenhagen is the capital and most populous city of Denmark.' },
  { id: 'd4', contents: '"William Shakespeare"\nWilliam Shakespeare was an English playwright, poet and actor.' },
  { id: 'd5', contents: '"Copenhagen"\nCopenhagen is the capital and most populous city of Denmark.' },
];

describe('Bm25Retriever', () => {
  const retriever = new Bm25Retriever(CORPUS, { source: 'test corpus' });

  it('scores every matching document as the BM25 formula does, best first', async () => {
    const queries = ['Shakespeare tragedy', 'capital of Denmark', 'macbeth MACBETH general', 'the'];
    const results = await retriever.search(queries, CORPUS.length);
    queries.forEach((query, q) => {
      const expected = bm25Scores(
        CORPUS.map((d) => d.contents),
        query,
      )
        .map((score, d) => ({ d, score }))
        .filter(({ score }) => score > 0)
        .sort((x, y) => y.score - x.score || x.d - y.d);
      expect(results[q].map((doc) => doc.id)).toEqual(expected.map(({ d }) => CORPUS[d].id));
      results[q].forEach((doc, rank) => {
        expect(doc.contents).toBe(CORPUS[expected[rank].d].contents);
        expect(doc.score).toBeCloseTo(expected[rank].score, 12);
      });
    });
    expect(results.map((docs) => docs.map((d) => d.id))).toEqual([
      ['d0', 'd1', 'd4'],
      ['d2', 'd3', 'd5', 'd0'],
      ['d1'],
      ['d3', 'd5', 'd2'],
    ]);
  });

  it('keeps the best topk and ranks equal scores by corpus order', async () => {
    const [top2] = await retriever.search(['copenhagen capital'], 2);
    expect(top2.map((d) => d.id)).toEqual(['d3', 'd5']);
    expect(top2[0].score).toBe(top2[1].score);
    const [top3] = await retriever.search(['copenhagen capital'], 3);
    expect(top3.map((d) => d.id)).toEqual(['d3', 'd5', 'd2']);
  });

  it('returns only documents that share a term with the query, so possibly none', async () => {
    const results = await retriever.search(['zebra quantum', '', 'hamlet zebra'], 3);
    expect(results[0]).toEqual([]);
    expect(results[1]).toEqual([]);
    expect(results[2].map((d) => d.id)).toEqual(['d0']);
  });

  it('lower-cases and splits on anything but Unicode letters, numbers and marks', async () => {
    const unicode = new Bm25Retriever([
      { id: 'a', contents: 'Émile Zola (1840–1902), Paris' },
      { id: 'b', contents: 'naïve café' },
      { id: 'c', contents: 'Zola1840 emile' },
    ]);
    expect((await unicode.search(['ÉMILE'], 3))[0].map((d) => d.id)).toEqual(['a']);
    expect((await unicode.search(['1902'], 3))[0].map((d) => d.id)).toEqual(['a']);
    expect((await unicode.search(['cafe\u0301'.normalize('NFC')], 3))[0].map((d) => d.id)).toEqual(['b']);
    expect((await unicode.search(['zola1840'], 3))[0].map((d) => d.id)).toEqual(['c']);
  });

  it('describes itself and rejects an empty corpus and a bad topk', async () => {
    expect(retriever.description).toBe('bm25 (test corpus, 6 docs)');
    expect(() => new Bm25Retriever([], { source: 'x.jsonl' })).toThrow('bm25 (x.jsonl): the corpus is empty');
    await expect(retriever.search(['q'], 1.5)).rejects.toThrow(
      'bm25 (test corpus, 6 docs): topk must be a positive integer, got 1.5',
    );
  });
});

describe('formatDocuments', () => {
  it("writes Search-R1's passage list: title from the first line, the rest as text", () => {
    expect(
      formatDocuments([
        { id: '1', contents: '"Hamlet"\nHamlet is a tragedy\nby Shakespeare.', score: 3.5 },
        { id: '2', contents: 'Only a title', score: null },
      ]),
    ).toBe('Doc 1(Title: "Hamlet") Hamlet is a tragedy\nby Shakespeare.\nDoc 2(Title: Only a title) \n');
    expect(formatDocuments([])).toBe('');
  });
});

describe('loadCorpus', () => {
  const dir = makeTempDirSync('corpus-');
  const write = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('reads one {id, contents} per line, skipping blank lines, ids as strings', async () => {
    const path = write(
      'ok.jsonl',
      '{"id": "0", "contents": "\\"A\\"\\ntext a"}\r\n\n  \n{"id": 17, "contents": "B\\nb", "extra": 1}\n',
    );
    expect(await loadCorpus(path)).toEqual([
      { id: '0', contents: '"A"\ntext a' },
      { id: '17', contents: 'B\nb' },
    ]);
  });

  it('names file:line and what was expected', async () => {
    const good = '{"id": "0", "contents": "x"}\n';
    const cases: [string, string][] = [
      ['{"id": "1", "contents": "y"', 'not valid JSON'],
      [
        '{"id": "1"}',
        '"contents" is missing; expected one JSON object {"id": string or number, "contents": string} per line',
      ],
      ['{"id": "1", "contents": ["y"]}', '"contents" is ["y"]'],
      ['{"contents": "y"}', '"id" is missing'],
      ['{"id": {"n": 1}, "contents": "y"}', '"id" is {"n":1}'],
      ['["1", "y"]', 'got ["1", "y"]'],
    ];
    for (const [i, [line, message]] of cases.entries()) {
      const path = write(`bad${i}.jsonl`, `${good}\n${line}\n`);
      await expect(loadCorpus(path)).rejects.toThrow(`${path}:3: ${message}`);
    }
  });

  it('rejects an empty corpus and a missing file', async () => {
    const empty = write('empty.jsonl', '\n\n');
    await expect(loadCorpus(empty)).rejects.toThrow(`corpus ${empty}: no documents`);
    await expect(loadCorpus(join(dir, 'missing.jsonl'))).rejects.toThrow(
      `corpus ${join(dir, 'missing.jsonl')}: cannot read: ENOENT`,
    );
  });
});
