// Prompt log-probs on the device, for a server's prompt scoring (vLLM's prompt_logprobs and echo, SGLang's
// logprob_start_len; lm-evaluation-harness scores log-likelihoods this way): the prompt goes through the
// incremental decoder in chunks with the logits of every position kept, and kernels/decode/prompt-logprobs turns
// each chunk's logits into the log-prob and rank of the token that follows and its most likely alternatives, so
// the host reads a few numbers per position, never (positions, V) logits. The decode batch's prefill keeps only
// each row's last position; this pass is separate and runs only for requests that ask for it. Given tokens' log-probs
// at every position (SGLang's token_ids_logprob) come out of the same kernel; more than the kernel's 20 alternatives
// (vLLM's prompt_logprobs up to --max-logprobs, -1 the whole vocabulary) gather every token's log-prob and rank them
// on the host.
import type { Engine, Tensor } from '../../engine/index.ts';
import { IncrementalDecoder, callSpans, callTokens } from '../../models/incremental-decoder.ts';
import { promptLogprobs } from '../../kernels/decode/prompt-logprobs.ts';
import { MAX_TOP_LOGPROBS } from '../../kernels/decode/top-logprobs.ts';
import type { PolicyWeights } from './types.ts';

/** Logits held per chunk at most: (chunk, V) floats, 32 MiB (a 152k vocabulary: 55 positions a chunk). */
const CHUNK_LOGITS = 1 << 23;

/** Positions a call may keep every logit of: (rows, V) floats within `chunkLogits` and one binding. */
export function scoredRowsPerCall(V: number, bindingBytes: number, chunkLogits = CHUNK_LOGITS): number {
  return Math.max(1, Math.floor(Math.min(chunkLogits, bindingBytes / 4) / V));
}

/** A prompt's scores: entry p − 1 is prompt token p's, given the tokens before it (the first token has none). */
export interface PromptScores {
  logprobs: Float32Array;
  /** 1 + the tokens with a larger logit at that position (vLLM's rank). */
  ranks: Uint32Array;
  /** (positions, K) the K most likely tokens at each position, most likely first, and their log-probs. */
  top: { ids: Uint32Array; logprobs: Float32Array; K: number };
  /** (positions, M) the log-probs of the `gather` tokens asked for, at each position. */
  gathered: Float32Array;
}

export interface ScoreOptions {
  /** Tokens whose log-probs are wanted at every position. */
  gather?: readonly number[];
  /** Scores log_softmax(logits / temperature): a sampled response scored as its sampler saw it; 1 by default. */
  temperature?: number;
}

export class PromptScorer {
  private readonly decoder: IncrementalDecoder;
  /** Positions per chunk: (chunk, V) logits within `chunkLogits` and one binding, its activations within one. */
  private readonly chunk: number;

  constructor(
    private readonly engine: Engine,
    private readonly policy: PolicyWeights,
    /** Longest prompt scored. */
    private readonly maxPromptTokens: number,
    /** Logits held per chunk at most (tests make chunks of a few positions). */
    chunkLogits = CHUNK_LOGITS,
  ) {
    const { config, lora } = policy;
    const binding = engine.maxBindingBytes;
    this.chunk = Math.min(
      scoredRowsPerCall(config.vocabSize, binding, chunkLogits),
      callTokens(config, maxPromptTokens, lora?.maxRank ?? 0, binding),
    );
    this.decoder = new IncrementalDecoder(engine, config, policy.params, {
      maxRows: 1,
      capacity: maxPromptTokens,
      lora,
      // The decode batch's cache dtype: a prompt is scored with the numerics its prefill has.
      cacheDtype: policy.cacheDtype,
      maxTokens: this.chunk,
    });
  }

  /**
   * Scores one prompt with K alternatives per position. Every dispatch is recorded before the first await, so the
   * weights that score it are those of the moment it is called.
   */
  async score(prompt: readonly number[], K: number, options: ScoreOptions = {}): Promise<PromptScores> {
    const e = this.engine;
    if (prompt.length > this.maxPromptTokens)
      throw new Error(`PromptScorer.score: ${prompt.length} tokens, more than its ${this.maxPromptTokens}`);
    const scoring = new PromptScoring(e, this.policy.config.vocabSize, prompt, K, options);
    const N = scoring.positions;
    this.decoder.reset(1);
    const inputs: Tensor[] = [];
    for (const [from, to] of N > 0 ? callSpans(N, this.chunk) : []) {
      const T = to - from;
      const ids = e.tensorFrom('promptScores.ids', [T], prompt.slice(from, from + T), 'u32');
      const positions = e.tensorFrom(
        'promptScores.positions',
        [T],
        Array.from({ length: T }, (_, t) => from + t),
        'i32',
      );
      inputs.push(ids, positions);
      scoring.add(this.decoder.extend({ ids, positions, T, mask: null, everyPosition: true }), from, T);
    }
    e.flush();
    for (const t of inputs) e.destroyTensor(t);
    return scoring.result();
  }

  destroy(): void {
    this.decoder.destroy();
  }
}

/**
 * One prompt's scores on the device, filled from the logits of its positions as calls produce them (the scorer's own
 * calls, or a decode batch's prefill that keeps every position's logits), and read back once.
 */
export class PromptScoring {
  /** Positions scored: every prompt token but the first has a log-prob, given the tokens before it. */
  readonly positions: number;
  private readonly out: {
    targets: Tensor<'u32'>;
    tokenLogprobs: Tensor<'f32'>;
    ranks: Tensor<'u32'>;
    topIds: Tensor<'u32'>;
    topLogprobs: Tensor<'f32'>;
    gatherIds: Tensor<'u32'>;
  } | null = null;
  /** One (call's rows, M) output per call: a whole prompt's every-token log-probs may exceed a binding. */
  private readonly gathered: Tensor[] = [];
  /** Above the kernel's alternatives, every token's log-prob is gathered and the host ranks them. */
  private readonly all: boolean;
  private readonly M: number;

  constructor(
    private readonly engine: Engine,
    private readonly V: number,
    prompt: readonly number[],
    private readonly K: number,
    private readonly options: ScoreOptions,
  ) {
    const e = engine;
    const N = Math.max(0, prompt.length - 1);
    this.positions = N;
    this.all = K > MAX_TOP_LOGPROBS;
    const gatherIds = this.all ? Array.from({ length: V }, (_, v) => v) : (options.gather ?? []);
    this.M = gatherIds.length;
    if (N < 1) return;
    if (!(K >= 0 && K <= V)) throw new Error(`PromptScorer.score: K ${K} must be in [0, V=${V}]`);
    const kernelK = this.all ? 0 : K;
    const M = this.M;
    this.out = {
      targets: e.tensorFrom('promptScores.targets', [N], prompt.slice(1), 'u32'),
      tokenLogprobs: e.tensor('promptScores.logprobs', [N]),
      ranks: e.tensor('promptScores.ranks', [N], 'u32'),
      topIds: e.tensor('promptScores.topIds', [Math.max(1, N * kernelK)], 'u32'),
      topLogprobs: e.tensor('promptScores.topLogprobs', [Math.max(1, N * kernelK)]),
      gatherIds: e.tensorFrom('promptScores.gatherIds', [Math.max(1, M)], M > 0 ? gatherIds : [0], 'u32'),
    };
  }

  /** Records the scores of positions [from, from + rows) from their logits (rows, V); a position past the last scored
   *  (the prompt's last token's, which no prompt token follows) is skipped. */
  add(logits: Tensor, from: number, rows: number): void {
    const n = Math.min(rows, this.positions - from);
    if (!this.out || n <= 0) return;
    const gathered = this.engine.tensor('promptScores.gathered', [Math.max(1, n * this.M)]);
    this.gathered.push(gathered);
    promptLogprobs(this.engine, {
      ...this.out,
      gathered,
      M: this.M,
      invTemperature: 1 / (this.options.temperature ?? 1),
      logits,
      V: this.V,
      rows: n,
      rowOffset: from,
      K: this.all ? 0 : this.K,
    });
  }

  /** The scores, read back once every position's were recorded (and flushed); frees the device tensors. */
  async result(): Promise<PromptScores> {
    const { engine: e, out, K, M, V } = this;
    const N = this.positions;
    if (!out)
      return { logprobs: new Float32Array(0), ranks: new Uint32Array(0), top: empty(K), gathered: empty(0).logprobs };
    // One read-back for all of them (a read each would submit and map once per tensor).
    const [logprobs, ranks, ids, topLogprobs, ...parts] = (await e.readAll([
      out.tokenLogprobs,
      out.ranks,
      out.topIds,
      out.topLogprobs,
      ...this.gathered,
    ])) as [Float32Array, Uint32Array, Uint32Array, Float32Array, ...Float32Array[]];
    for (const t of [...Object.values(out), ...this.gathered]) e.destroyTensor(t);
    const rows = new Float32Array(N * M);
    let at = 0;
    for (const part of parts) {
      const n = Math.min(part.length, N * M - at);
      rows.set(part.subarray(0, n), at);
      at += n;
    }
    if (!this.all)
      return {
        logprobs,
        ranks,
        top: { ids: ids.subarray(0, N * K), logprobs: topLogprobs.subarray(0, N * K), K },
        gathered: rows,
      };
    return { logprobs, ranks, top: rankedRows(rows, N, V, K), gathered: pick(rows, N, V, this.options.gather ?? []) };
  }
}

const empty = (K: number) => ({ ids: new Uint32Array(0), logprobs: new Float32Array(0), K });

/** Each (V)-row's K most likely tokens, in row-top-k.wgsl's order (larger first, ties to the lower index). */
function rankedRows(rows: Float32Array, N: number, V: number, K: number): PromptScores['top'] {
  const ids = new Uint32Array(N * K);
  const logprobs = new Float32Array(N * K);
  const order = new Uint32Array(V);
  for (let p = 0; p < N; p++) {
    const row = rows.subarray(p * V, (p + 1) * V);
    for (let v = 0; v < V; v++) order[v] = v;
    order.sort((a, b) => row[b] - row[a] || a - b);
    for (let k = 0; k < K; k++) {
      ids[p * K + k] = order[k];
      logprobs[p * K + k] = row[order[k]];
    }
  }
  return { ids, logprobs, K };
}

/** The columns `ids` of (N, V) rows, as (N, ids.length). */
function pick(rows: Float32Array, N: number, V: number, ids: readonly number[]): Float32Array {
  const out = new Float32Array(N * ids.length);
  for (let p = 0; p < N; p++) ids.forEach((id, j) => (out[p * ids.length + j] = rows[p * V + id]));
  return out;
}
