// The rollout servers as one pool: every call has a deadline, every failure names the URL and what was expected,
// and a batch of jobs is spread over the live servers by a shared queue (a faster server takes more). A server
// that fails a job (refused connection, timeout, HTTP error, malformed JSON) leaves the pool for the rest of the
// run and its job goes back to the queue, for at most `maxRetries` retries per job; when no server is left, or a job
// has used its retries, the batch stops with one line. fetch and AbortSignal.timeout run in browsers too.
import { WireFormatError, type HttpCall } from './wire-format.ts';

export interface ServerPoolOptions {
  /** Seconds one HTTP call may take, connection to last byte. */
  timeoutS: number;
  /** Times one job may be retried on another server after its server failed. */
  maxRetries: number;
  /** Told when a server leaves the pool (a warning line). */
  onServerLost?: (url: string, reason: string) => void;
  /** Aborted when the run is asked to stop (a signal): every call under way ends at once with CallStopped. */
  stop?: AbortSignal;
}

/** A call ended because the run is stopping, not because of its server: the server stays in the pool. */
export class CallStopped extends Error {
  override name = 'CallStopped';
}

/** A server's failure, one line: "<url><path>: <what happened>; expected <what>". */
export class ServerError extends Error {
  constructor(
    readonly url: string,
    message: string,
  ) {
    super(message);
  }
}

/** Requests to one server at a time per job; a server's whole batch of requests runs concurrently on it. */
export class ServerPool {
  private readonly live: string[];

  constructor(
    urls: readonly string[],
    readonly options: ServerPoolOptions,
  ) {
    if (urls.length === 0)
      throw new Error('actor_rollout_ref.rollout.server_urls: no server; expected [http://host:port, …]');
    this.live = urls.map((u) => checkServerUrl(u));
  }

  get urls(): readonly string[] {
    return this.live;
  }

  /** One call; the parsed JSON answer (null for an empty body). */
  async call(url: string, call: HttpCall, expected: string): Promise<unknown> {
    const where = `${url}${call.path}`;
    const { stop } = this.options;
    const stopped = () => new CallStopped(`${where}: abandoned, the run is stopping`);
    if (stop?.aborted) throw stopped();
    const timeout = AbortSignal.timeout(this.options.timeoutS * 1000);
    let response: Response;
    try {
      response = await fetch(where, {
        method: call.method,
        headers: call.body === undefined ? undefined : { 'content-type': 'application/json' },
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: stop ? AbortSignal.any([timeout, stop]) : timeout,
      });
    } catch (err) {
      if (stop?.aborted) throw stopped();
      throw new ServerError(url, `${where}: ${connectionFailure(err, this.options.timeoutS)}; expected ${expected}`);
    }
    let text: string;
    try {
      text = await response.text();
    } catch (err) {
      if (stop?.aborted) throw stopped();
      throw new ServerError(
        url,
        `${where}: the answer broke off (${connectionFailure(err, this.options.timeoutS)}); expected ${expected}`,
      );
    }
    if (!response.ok)
      throw new ServerError(url, `${where}: HTTP ${response.status} ${errorMessage(text)}; expected ${expected}`);
    if (text.trim() === '') return null;
    try {
      return JSON.parse(text);
    } catch {
      throw new ServerError(
        url,
        `${where}: the answer is not JSON (${JSON.stringify(text.slice(0, 60))}); expected ${expected}`,
      );
    }
  }

  /** call() then parse(); a parse failure is the server's, named with the URL. */
  async request<T>(url: string, call: HttpCall, expected: string, parse: (json: unknown) => T): Promise<T> {
    const json = await this.call(url, call, expected);
    try {
      return parse(json);
    } catch (err) {
      if (err instanceof WireFormatError)
        throw new ServerError(url, `${url}${call.path}: malformed answer, expected ${err.message}`);
      throw err;
    }
  }

  /** Runs every job on some live server, all at once; answers in job order. */
  async spread<J, R>(jobs: readonly J[], run: (url: string, job: J) => Promise<R>): Promise<R[]> {
    const results = new Array<R>(jobs.length);
    const queue = jobs.map((_, i) => i);
    const attempts = new Array<number>(jobs.length).fill(0);
    let fatal: Error | null = null;
    const worker = async (url: string): Promise<void> => {
      while (fatal === null && this.live.includes(url)) {
        const i = queue.shift();
        if (i === undefined) return;
        try {
          results[i] = await run(url, jobs[i]);
        } catch (err) {
          if (!(err instanceof ServerError)) {
            fatal = err as Error;
            return;
          }
          this.drop(url, err.message);
          if (attempts[i]++ >= this.options.maxRetries)
            fatal = new Error(`${err.message} (job retried ${this.options.maxRetries} times on other servers)`);
          else if (this.live.length === 0) fatal = new Error(`${err.message} (no rollout server left)`);
          else queue.unshift(i);
          return;
        }
      }
    };
    // Each server gets as many concurrent requests as the batch would give it spread evenly, so continuous batching
    // on the server sees them together; a server that fails hands its share to the others' workers.
    while (queue.length > 0 && fatal === null) {
      const perServer = Math.ceil(queue.length / this.live.length);
      await Promise.all(this.live.flatMap((url) => Array.from({ length: perServer }, () => worker(url))));
    }
    if (fatal) throw fatal;
    return results;
  }

  /** Every live server, concurrently; any failure stops (a weight sync must reach all of them or none may generate). */
  async everyServer<R>(run: (url: string) => Promise<R>): Promise<R[]> {
    return Promise.all(this.live.map((url) => run(url)));
  }

  private drop(url: string, reason: string): void {
    const at = this.live.indexOf(url);
    if (at < 0) return;
    this.live.splice(at, 1);
    this.options.onServerLost?.(url, reason);
  }
}

function checkServerUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(
      `actor_rollout_ref.rollout.server_urls: ${JSON.stringify(url)} is not a URL; expected http://host:port`,
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new Error(`actor_rollout_ref.rollout.server_urls: ${url}: expected an http:// or https:// URL`);
  return url.replace(/\/+$/, '');
}

function connectionFailure(err: unknown, timeoutS: number): string {
  const e = err as { name?: string; cause?: { code?: string }; message?: string };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return `no answer within ${timeoutS}s`;
  const code = e.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'the connection was closed';
  return code ?? e.message ?? String(err);
}

/**
 * The error's text as OpenAI ({error: {message}}), SGLang ({error: {message}} or {message}) and FastAPI ({detail}) send
 * it.
 */
function errorMessage(text: string): string {
  try {
    const json = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown };
    const message = typeof json.error === 'object' ? json.error?.message : (json.error ?? json.message ?? json.detail);
    if (message !== undefined)
      return `(${typeof message === 'string' ? message : JSON.stringify(message)})`.slice(0, 200);
  } catch {
    /* not JSON: show the text */
  }
  return `(${text.slice(0, 120)})`;
}
