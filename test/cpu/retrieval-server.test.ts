// tools/retrieval-server: Search-R1's /retrieve protocol over BM25, checked through the project's own HTTP client.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRetrievalServer } from '../../tools/retrieval-server.ts';
import { HttpRetriever } from '../../ppo/environments/search/http-retriever.ts';
import { Bm25Retriever } from '../../ppo/environments/search/bm25-retriever.ts';
import { syntheticQaDataset } from '../../ppo/tasks/synthetic-qa.ts';

const { corpus } = syntheticQaDataset({ seed: 1, valSize: 0 });
const bm25 = new Bm25Retriever(corpus);

describe('retrieval server', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createRetrievalServer(bm25);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/retrieve`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('answers HttpRetriever with exactly the documents and scores of the in-process BM25', async () => {
    const queries = ['zor vak color', 'mi bel city', 'nothing matches this'];
    expect(await new HttpRetriever({ url }).search(queries, 3)).toEqual(await bm25.search(queries, 3));
  });

  it('gives bare documents without return_scores, and 400 or 404 naming the problem', async () => {
    const post = async (body: string, path = '/retrieve') => {
      const res = await fetch(url.replace('/retrieve', path), { method: 'POST', body });
      return { status: res.status, json: await res.json() };
    };
    expect(await post(JSON.stringify({ queries: ['zor vak color'], topk: 1 }))).toEqual({
      status: 200,
      json: { result: [[{ id: corpus[0].id, contents: corpus[0].contents }]] },
    });
    expect(await post('{')).toMatchObject({ status: 400, json: { error: expect.stringContaining('not JSON') } });
    expect(await post(JSON.stringify({ queries: 'zor' }))).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining('"queries" must be a list of strings') },
    });
    expect(await post(JSON.stringify({ queries: ['zor'], topk: 0 }))).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining('"topk" must be a positive integer') },
    });
    expect(await post('{}', '/search')).toMatchObject({
      status: 404,
      json: { error: 'POST /search: this server answers POST /retrieve' },
    });
  });
});
