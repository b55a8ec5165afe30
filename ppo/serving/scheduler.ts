// The server's scheduler: requests wait in one queue in arrival order, and their samples go into the continuous
// batching loop's slots as slots free, across requests, so one request's samples never wait for another request
// to end. Work that needs the loop stopped (a weight update, loading an adapter) is queued too: requests that
// arrived before it are served entirely by the old weights, the ones after it entirely by the new; the samples of
// a request therefore never mix weights. A request for another LoRA adapter than the running loop's waits for
// that loop to end (a decode batch runs one set of weights).
import type { FinishReason } from '../generation/types.ts';
import { TurnProgress } from '../generation/sample-records.ts';
import type { QueuedSample, SampleQueue, TopAlternatives } from '../generation/continuous-batching.ts';
import type { SamplingParams } from '../../kernels/decode/sample.ts';
import type { RowProcessing } from '../../kernels/decode/logits-processors.ts';
import type { PromptScores, ScoreOptions } from '../generation/prompt-scoring.ts';

/** A request as the loop runs it: token ids, n samples per prompt, each with the stream (seed, sampleOffset + j). */
export interface ScheduledRequest {
  prompts: readonly number[][];
  n: number;
  /** Tokens each sample may generate. */
  budget: number;
  sampling: SamplingParams;
  sampleOffset: number;
  stopStrings: readonly string[];
  stopTokenIds: readonly number[];
  adapter: string | null;
  /** Most likely alternatives to report per generated token (0: none). */
  topLogprobs?: number;
  /** Penalties, logit_bias, ignore_eos, min_tokens, min_p (absent: none). */
  processing?: RowProcessing;
  /** Aborting it ends the request's samples: waiting ones at once, decoding ones at the next decode step. */
  signal?: AbortSignal;
  /** Told each sample's tokens as the host reads them, and each sample's result as it ends (streaming). */
  observer?: SampleObserver;
  /** Prompt log-probs wanted from the prefills: each prompt's first sample scores its prompt (QueuedSample). */
  scorePrompts?: PromptScoreSink;
}

/** Where a request's prompt scores go, prompt by prompt: from its first sample's prefill, or null where that sample
 *  ended without one (its request was aborted while it waited). The first word on a prompt counts. */
export interface PromptScoreSink {
  /** Alternatives per position (the whole vocabulary at most). */
  K: number;
  options(prompt: number): ScoreOptions;
  settle(prompt: number, scores: Promise<PromptScores> | null): void;
}

export interface SampleObserver {
  /** Sample j (prompt-major) drew these tokens, with their log-probs. */
  tokens(j: number, tokens: readonly number[], logprobs: readonly number[], top: readonly TopAlternatives[]): void;
  finished(j: number, result: SampleResult): void;
}

/** Why a sample ended: the rollout's reasons, or 'abort' (its request was aborted or its client went away). */
export type SampleEnd = FinishReason | 'abort';

/** One sample's response: the tokens drawn (the ending token included) and their log-probs. */
export interface SampleResult {
  /** Index of its prompt in the request. */
  prompt: number;
  tokens: number[];
  logprobs: Float32Array;
  /** Per token, its most likely alternatives (when the request asked for them), else null. */
  top: TopAlternatives[] | null;
  reason: SampleEnd;
}

interface GenerateJob {
  kind: 'generate';
  adapter: string | null;
  /** Samples per prompt: sample j answers prompt ⌊j / n⌋. */
  n: number;
  samples: QueuedSample[];
  taken: number;
  results: (SampleResult | null)[];
  remaining: number;
  aborted: boolean;
  observer: SampleObserver | undefined;
  scorePrompts: PromptScoreSink | undefined;
  resolve: (results: SampleResult[]) => void;
  reject: (err: unknown) => void;
}

interface ExclusiveJob {
  kind: 'exclusive';
  work: () => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Runs one continuous-batching loop over the queue with the weights of `adapter` (null: the base model). */
export type DecodeLoop = (queue: SampleQueue, adapter: string | null) => Promise<void>;

export class Scheduler {
  private readonly jobs: (GenerateJob | ExclusiveJob)[] = [];
  private readonly owners = new Map<QueuedSample, { job: GenerateJob; index: number }>();
  private driving: Promise<void> | null = null;
  private exclusiveRunning = false;

  constructor(
    private readonly decodeLoop: DecodeLoop,
    private readonly eosTokenIds: readonly number[],
    /** Token ids → text, for stop strings. */
    private readonly decode: (ids: readonly number[]) => Promise<string>,
    /** Told each request aborted (by its client or /abort_request) before all its samples ended. */
    private readonly onAbort: () => void = () => {},
  ) {}

  /** Samples waiting for a slot or decoding, over all requests. */
  get pendingSamples(): number {
    return this.jobs.reduce((n, j) => n + (j.kind === 'generate' ? j.remaining : 0), 0);
  }

  /** Work that needs the loop stopped (a weight update, an adapter change) runs or waits in the queue. */
  get exclusiveQueued(): boolean {
    return this.exclusiveRunning || this.jobs.some((j) => j.kind === 'exclusive');
  }

  generate(r: ScheduledRequest): Promise<SampleResult[]> {
    return new Promise((resolve, reject) => {
      // ignore_eos: no EOS ends a sample on the host (the logits processing reopens the row on the device).
      const config = { eosTokenIds: r.processing?.ignoreEos ? [] : this.eosTokenIds, decode: this.decode };
      const samples = r.prompts
        .flatMap((prompt) => Array.from({ length: r.n }, () => prompt))
        .map(
          (prompt, j): QueuedSample => ({
            prompt,
            sampling: { ...r.sampling, stream: (r.sampleOffset + j) >>> 0 },
            progress: new TurnProgress(config, r.stopTokenIds, r.stopStrings, r.budget),
            topLogprobs: r.topLogprobs ?? 0,
            processing: r.processing,
            onTokens: r.observer ? (tokens, logprobs, top) => r.observer!.tokens(j, tokens, logprobs, top) : undefined,
            scorePrompt:
              r.scorePrompts && j % r.n === 0
                ? {
                    K: r.scorePrompts.K,
                    options: r.scorePrompts.options(j / r.n),
                    scored: (scores) => r.scorePrompts!.settle(j / r.n, scores),
                  }
                : undefined,
          }),
        );
      const job: GenerateJob = {
        kind: 'generate',
        adapter: r.adapter,
        n: r.n,
        samples,
        taken: 0,
        results: samples.map(() => null),
        remaining: samples.length,
        aborted: false,
        observer: r.observer,
        scorePrompts: r.scorePrompts,
        resolve,
        reject,
      };
      samples.forEach((s, index) => this.owners.set(s, { job, index }));
      this.jobs.push(job);
      if (r.signal?.aborted) this.abort(job);
      else r.signal?.addEventListener('abort', () => this.abort(job), { once: true });
      this.pump();
    });
  }

  /** Ends a request's samples: the waiting ones now (reason 'abort'), the decoding ones at the loop's next step. */
  private abort(job: GenerateJob): void {
    if (job.aborted || job.remaining === 0) return;
    job.aborted = true;
    this.onAbort();
    for (const s of job.samples.slice(0, job.taken)) s.cancelled = true;
    const waiting = job.samples.slice(job.taken);
    job.taken = job.samples.length;
    for (const s of waiting) this.finished(s, new Float32Array(0));
  }

  /** Runs `work` once every request queued before it has ended, before any queued after it starts. */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.jobs.push({ kind: 'exclusive', work, resolve: resolve as (value: unknown) => void, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.driving) return;
    this.driving = this.drive().finally(() => {
      this.driving = null;
      if (this.jobs.length > 0) this.pump();
    });
  }

  private async drive(): Promise<void> {
    while (this.jobs.length > 0) {
      const head = this.jobs[0];
      if (head.kind === 'exclusive') {
        this.jobs.shift();
        this.exclusiveRunning = true;
        await head.work().then(head.resolve, head.reject);
        this.exclusiveRunning = false;
        continue;
      }
      const queue = new LoopQueue(this, head.adapter);
      let failure: unknown = null;
      try {
        await this.decodeLoop(queue, head.adapter);
      } catch (err) {
        failure = err;
      }
      // Every request the loop took samples of has ended unless the loop failed: fail those, never leave them hanging.
      for (const job of this.jobs.filter((j): j is GenerateJob => j.kind === 'generate' && j.taken > 0)) {
        this.fail(job, failure ?? new Error("the decode loop ended before this request's samples did"));
      }
    }
  }

  private fail(job: GenerateJob, err: unknown): void {
    this.jobs.splice(this.jobs.indexOf(job), 1);
    for (const s of job.samples) this.owners.delete(s);
    job.reject(err);
  }

  /**
   * The requests a loop with `adapter` may take samples from: those queued before the first that needs another loop.
   */
  admissible(adapter: string | null): GenerateJob[] {
    const open: GenerateJob[] = [];
    for (const job of this.jobs) {
      if (job.kind !== 'generate' || job.adapter !== adapter) break;
      open.push(job);
    }
    return open;
  }

  finished(sample: QueuedSample, logprobs: Float32Array): void {
    const owner = this.owners.get(sample);
    if (!owner) return;
    const { job, index } = owner;
    this.owners.delete(sample);
    // A prompt scorer whose sample never reached a prefill: the separate pass scores it.
    if (sample.scorePrompt) job.scorePrompts?.settle(Math.floor(index / job.n), null);
    const result: SampleResult = {
      prompt: Math.floor(index / job.n),
      tokens: sample.progress.tokens,
      logprobs,
      top: (sample.topLogprobs ?? 0) > 0 ? (sample.top ?? []) : null,
      reason: sample.progress.reason ?? (sample.cancelled || job.aborted ? 'abort' : 'length'),
    };
    job.results[index] = result;
    job.observer?.finished(index, result);
    if (--job.remaining === 0) {
      this.jobs.splice(this.jobs.indexOf(job), 1);
      job.resolve(job.results as SampleResult[]);
    }
  }
}

/** The scheduler's requests as one loop's queue: samples of the admissible requests, in arrival order. */
class LoopQueue implements SampleQueue {
  constructor(
    private readonly scheduler: Scheduler,
    private readonly adapter: string | null,
  ) {}

  get waiting(): number {
    return this.scheduler.admissible(this.adapter).reduce((n, job) => n + job.samples.length - job.taken, 0);
  }

  take(count: number): QueuedSample[] {
    const taken: QueuedSample[] = [];
    for (const job of this.scheduler.admissible(this.adapter)) {
      while (taken.length < count && job.taken < job.samples.length) taken.push(job.samples[job.taken++]);
    }
    return taken;
  }

  finished(sample: QueuedSample, logprobs: Float32Array): void {
    this.scheduler.finished(sample, logprobs);
  }
}
