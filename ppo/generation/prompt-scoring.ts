// Prompt log-probs on the device, for a server's prompt scoring (vLLM's prompt_logprobs and echo, SGLang's
// logprob_start_len; lm-evaluation-harness scores log-likelihoods this way): the prompt goes through the
// incremental decoder in chunks with the logits of every position kept, and kernels/decode/prompt-logprobs turns
// each chunk's logits into the log-prob and rank of the token that follows and its most likely alternatives, so
// the host reads a few numbers per position, never (positions, V) logits. The decode batch's prefill keeps only
// each row's last position; this pass is separate and runs only for requests that ask for it.
import type { Engine, Tensor } from '../../engine/index.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { promptLogprobs } from '../../kernels/decode/prompt-logprobs.ts';
import type { PolicyWeights } from './types.ts';

/** Logits held per chunk at most: (chunk, V) floats, 32 MiB (a 152k vocabulary: 55 positions a chunk). */
const CHUNK_LOGITS = 1 << 23;

/** A prompt's scores: entry p − 1 is prompt token p's, given the tokens before it (the first token has none). */
export interface PromptScores {
  logprobs: Float32Array;
  /** 1 + the tokens with a larger logit at that position (vLLM's rank). */
  ranks: Uint32Array;
  /** (positions, K) the K most likely tokens at each position, most likely first, and their log-probs. */
  top: { ids: Uint32Array; logprobs: Float32Array; K: number };
}

export class PromptScorer {
  private readonly decoder: IncrementalDecoder;

  constructor(
    private readonly engine: Engine,
    private readonly policy: PolicyWeights,
    /** Longest prompt scored. */
    private readonly maxPromptTokens: number,
    /** Logits held per chunk at most (tests make chunks of a few positions). */
    private readonly chunkLogits = CHUNK_LOGITS,
  ) {
    this.decoder = new IncrementalDecoder(engine, policy.config, policy.params, {
      maxRows: 1,
      capacity: maxPromptTokens,
      lora: policy.lora,
      // The decode batch's cache dtype: a prompt is scored with the numerics its prefill has.
      cacheDtype: policy.cacheDtype,
    });
  }

  /**
   * Scores one prompt with K alternatives per position. Every dispatch is recorded before the first await, so the
   * weights that score it are those of the moment it is called.
   */
  async score(prompt: readonly number[], K: number): Promise<PromptScores> {
    const e = this.engine;
    const N = prompt.length - 1;
    if (N < 1) return { logprobs: new Float32Array(0), ranks: new Uint32Array(0), top: empty(K) };
    if (prompt.length > this.maxPromptTokens)
      throw new Error(`PromptScorer.score: ${prompt.length} tokens, more than its ${this.maxPromptTokens}`);
    const V = this.policy.config.vocabSize;
    const chunk = Math.max(1, Math.floor(this.chunkLogits / V));
    const out = {
      targets: e.tensorFrom('promptScores.targets', [N], prompt.slice(1), 'u32'),
      tokenLogprobs: e.tensor('promptScores.logprobs', [N]),
      ranks: e.tensor('promptScores.ranks', [N], 'u32'),
      topIds: e.tensor('promptScores.topIds', [Math.max(1, N * K)], 'u32'),
      topLogprobs: e.tensor('promptScores.topLogprobs', [Math.max(1, N * K)]),
    };
    this.decoder.reset(1);
    const inputs: Tensor[] = [];
    for (let from = 0; from < N; from += chunk) {
      const T = Math.min(chunk, N - from);
      const ids = e.tensorFrom('promptScores.ids', [T], prompt.slice(from, from + T), 'u32');
      const positions = e.tensorFrom(
        'promptScores.positions',
        [T],
        Array.from({ length: T }, (_, t) => from + t),
        'i32',
      );
      inputs.push(ids, positions);
      const logits = this.decoder.extend({ ids, positions, T, mask: null, everyPosition: true });
      promptLogprobs(e, { ...out, logits, V, rows: T, rowOffset: from, K });
    }
    e.flush();
    for (const t of inputs) e.destroyTensor(t);
    const [logprobs, ranks, ids, topLogprobs] = await Promise.all([
      e.read(out.tokenLogprobs),
      e.read(out.ranks),
      e.read(out.topIds),
      e.read(out.topLogprobs),
    ]);
    for (const t of Object.values(out)) e.destroyTensor(t);
    return { logprobs, ranks, top: { ids: ids.subarray(0, N * K), logprobs: topLogprobs.subarray(0, N * K), K } };
  }

  destroy(): void {
    this.decoder.destroy();
  }
}

const empty = (K: number) => ({ ids: new Uint32Array(0), logprobs: new Float32Array(0), K });
