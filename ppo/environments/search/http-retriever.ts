// Client of Search-R1's retrieval server (search_r1/search/retrieval_server.py, POST /retrieve): one request per
// rollout turn carrying every query, {"queries": [...], "topk": k, "return_scores": true}, answered with
// {"result": [[{"document": {"id", "contents", ...}, "score"}, ...], ...]}, one list per query. Entries that are
// bare documents (the server's return_scores=false shape) are accepted with a null score, and documents without an
// id (the server's BM25 mode returns only title/text/contents) get id "". A retrieval server shared by many rollout
// workers drops or stalls requests under load, so each attempt has its own timeout and transient failures (network
// errors, timeouts, HTTP 429 and 5xx) are retried with exponential back-off; any other failure is a configuration or
// protocol error and throws at once. Never returns empty results in place of an error: a silent empty
// <information> block would train the policy that search is useless.
import { checkTopk, type Retriever, type RetrievedDocument } from './retriever.ts';

export interface HttpRetrieverOptions {
  /** The retrieve endpoint, e.g. "http://127.0.0.1:8000/retrieve". */
  url: string;
  /** Per attempt, from sending the request to reading the whole answer. */
  timeoutMs?: number;
  /** Retries after the first attempt. */
  maxRetries?: number;
  /** Wait before the first retry, doubled before each further one. */
  retryDelayMs?: number;
  fetch?: typeof fetch;
}

/** A failure that another attempt may not repeat. */
class TransientError extends Error {}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function describeFetchError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // Node's fetch reports "fetch failed" and hides the reason (ECONNREFUSED, ...) in cause.
  const cause = (err as { cause?: unknown }).cause;
  if (cause instanceof Error) return `${err.message}: ${(cause as { code?: string }).code ?? cause.message}`;
  return err.message;
}

export class HttpRetriever implements Retriever {
  readonly description: string;
  private readonly url: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly retryDelayMs: number;
  private readonly fetch: typeof fetch;

  constructor({
    url,
    timeoutMs = 10_000,
    maxRetries = 3,
    retryDelayMs = 500,
    fetch: fetchFn = globalThis.fetch,
  }: HttpRetrieverOptions) {
    if (!/^https?:\/\//.test(url)) throw new Error(`retriever url must be an http(s) URL, got "${url}"`);
    if (!(timeoutMs > 0)) throw new Error(`retriever ${url}: timeoutMs must be positive, got ${timeoutMs}`);
    if (!Number.isInteger(maxRetries) || maxRetries < 0)
      throw new Error(`retriever ${url}: maxRetries must be a non-negative integer, got ${maxRetries}`);
    if (!(retryDelayMs >= 0))
      throw new Error(`retriever ${url}: retryDelayMs must be non-negative, got ${retryDelayMs}`);
    this.url = url;
    this.description = url;
    this.timeoutMs = timeoutMs;
    this.maxRetries = maxRetries;
    this.retryDelayMs = retryDelayMs;
    this.fetch = fetchFn;
  }

  async search(queries: readonly string[], topk: number): Promise<RetrievedDocument[][]> {
    checkTopk(topk, `retriever ${this.url}`);
    if (queries.length === 0) return [];
    const body = JSON.stringify({ queries, topk, return_scores: true });
    const attempts = this.maxRetries + 1;
    let lastCause = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, this.retryDelayMs * 2 ** (attempt - 2)));
      let text: string;
      try {
        text = await this.post(body);
      } catch (err) {
        if (!(err instanceof TransientError)) throw err;
        lastCause = err.message;
        continue;
      }
      return parseAnswer(this.url, text, queries.length, topk);
    }
    throw new Error(
      `retriever ${this.url}: no answer after ${attempts} attempt${attempts === 1 ? '' : 's'}; last: ${lastCause}`,
    );
  }

  /** The answer's text; TransientError for what a retry may fix. */
  private async post(body: string): Promise<string> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.timeoutMs);
    try {
      // Called unbound: browsers reject window.fetch called as a method of another object.
      const send = this.fetch;
      const response = await send(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: abort.signal,
      });
      const text = await response.text();
      if (response.ok) return text;
      const status = `HTTP ${response.status} ${response.statusText}: ${text.slice(0, 200)}`;
      if (response.status === 429 || response.status >= 500) throw new TransientError(status);
      throw new Error(`retriever ${this.url}: ${status} (not retried: the request itself is wrong)`);
    } catch (err) {
      if (abort.signal.aborted) throw new TransientError(`no answer within ${this.timeoutMs} ms`);
      if (err instanceof TypeError) throw new TransientError(describeFetchError(err));
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }
}

function invalidAnswer(url: string, what: string): never {
  throw new Error(
    `retriever ${url}: ${what}; expected {"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}, one ` +
      `list per query`,
  );
}

function parseAnswer(url: string, text: string, queryCount: number, topk: number): RetrievedDocument[][] {
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    invalidAnswer(url, `answer is not JSON: ${text.slice(0, 200)}`);
  }
  const result = isObject(answer) ? answer.result : undefined;
  if (!Array.isArray(result)) invalidAnswer(url, `answer has no "result" list: ${text.slice(0, 200)}`);
  if (result.length !== queryCount)
    invalidAnswer(url, `answer has ${result.length} result lists for ${queryCount} queries`);
  return result.map((entries: unknown, q) => {
    if (!Array.isArray(entries)) invalidAnswer(url, `result ${q} is ${JSON.stringify(entries)}, not a list`);
    if (entries.length > topk)
      invalidAnswer(url, `result ${q} has ${entries.length} documents, more than topk=${topk}`);
    return entries.map((entry: unknown, rank) => parseDocument(url, entry, `result ${q} document ${rank}`));
  });
}

function parseDocument(url: string, entry: unknown, where: string): RetrievedDocument {
  const wrapped = isObject(entry) && isObject(entry.document);
  const doc = wrapped ? entry.document : entry;
  const score = wrapped ? (entry.score ?? null) : null;
  if (!isObject(doc) || typeof doc.contents !== 'string')
    invalidAnswer(url, `${where} has no string "contents": ${JSON.stringify(entry)?.slice(0, 200)}`);
  const { id, contents } = doc;
  if (id !== undefined && typeof id !== 'string' && typeof id !== 'number')
    invalidAnswer(url, `${where} has id ${JSON.stringify(id)}, not a string or number`);
  if (score !== null && (typeof score !== 'number' || !Number.isFinite(score)))
    invalidAnswer(url, `${where} has score ${JSON.stringify(score)}, not a number`);
  return { id: id === undefined ? '' : String(id), contents, score };
}
