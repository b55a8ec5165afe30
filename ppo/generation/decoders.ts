// The rollout's incremental decoders (the decode batch's, and the one continuous batching prefills newcomers
// in), kept between rollouts of the same or smaller size, and how a block of tokens goes into one of them.
import type { Engine, Tensor } from '../../engine/index.ts';
import { IncrementalDecoder, callSpans, callTokens } from '../../models/incremental-decoder.ts';
import type { PolicyWeights } from './types.ts';
import { scoredRowsPerCall, type PromptScoring } from './prompt-scoring.ts';

export class RolloutDecoders {
  /** The decode batch's decoder, and the one continuous batching prefills newcomers in. */
  private readonly decoders = new Map<'decode' | 'prefill', IncrementalDecoder>();
  /** The last prompt token's logits of a prefill that kept every position's (feedScored). */
  private lastLogits: Tensor | null = null;

  constructor(
    readonly engine: Engine,
    readonly policy: PolicyWeights,
  ) {}

  /** `maxTokens`: the most tokens a block fed to it holds (1 for a cache whose rows are prefilled elsewhere); a
   *  block whose activations outgrow a binding goes in as several calls (models/incremental-decoder.ts callTokens). */
  decoderFor(role: 'decode' | 'prefill', rows: number, capacity: number, maxTokens: number): IncrementalDecoder {
    const { config, params, lora } = this.policy;
    const tokens = callTokens(config, maxTokens, lora?.maxRank ?? 0, this.engine.maxBindingBytes);
    const d = this.decoders.get(role);
    if (d && d.cache.maxRows >= rows && d.cache.capacity >= capacity && d.maxTokens >= tokens) return d;
    d?.destroy();
    const fresh = new IncrementalDecoder(this.engine, config, params, {
      maxRows: rows,
      capacity,
      lora,
      cacheDtype: this.policy.cacheDtype,
      maxTokens: tokens,
    });
    this.decoders.set(role, fresh);
    return fresh;
  }

  /**
   * Appends a (rows, T) block of tokens to the cache; returns the logits of each row's last token. A block wider
   * than the decoder's calls (chunked prefill) goes in as calls of nearly equal widths (callSpans), each extending the
   * cache the ones before it wrote, only the last computing logits.
   */
  feedBlock(decoder: IncrementalDecoder, ids: number[][], mask: number[][], positions: number[][]): Tensor {
    const e = this.engine;
    const spans = callSpans(ids[0].length, decoder.maxTokens);
    const inputs: Tensor[] = [];
    let logits: Tensor | null = null;
    for (const [k, [from, to]] of spans.entries()) {
      const block = (rows: number[][]) => rows.flatMap((row) => row.slice(from, to));
      const width = to - from;
      const idsTensor = e.tensorFrom('rollout.blockIds', [ids.length * width], block(ids), 'u32');
      const positionsTensor = e.tensorFrom('rollout.blockPositions', [ids.length * width], block(positions), 'i32');
      inputs.push(idsTensor, positionsTensor);
      const input = { ids: idsTensor, positions: positionsTensor, T: width, mask: block(mask) };
      if (k + 1 < spans.length) decoder.append(input);
      else logits = decoder.extend(input);
    }
    e.flush();
    for (const t of inputs) e.destroyTensor(t);
    return logits!;
  }

  /**
   * Prefills one prompt (a row of its own) as feedBlock does, keeping every position's logits for `scoring`: a server's
   * prompt log-probs out of the prefill itself, with no pass of their own. Its calls hold at most as many positions as
   * one binding of logits does (scoredRowsPerCall). Returns the logits of its last token, (1, V).
   */
  feedScored(decoder: IncrementalDecoder, prompt: readonly number[], scoring: PromptScoring): Tensor {
    const e = this.engine;
    const V = this.policy.config.vocabSize;
    const rows = Math.min(decoder.maxTokens, scoredRowsPerCall(V, e.maxBindingBytes));
    const inputs: Tensor[] = [];
    let last: Tensor | null = null;
    for (const [from, to] of callSpans(prompt.length, rows)) {
      const T = to - from;
      const ids = e.tensorFrom('rollout.blockIds', [T], prompt.slice(from, to), 'u32');
      const positions = e.tensorFrom(
        'rollout.blockPositions',
        [T],
        Array.from({ length: T }, (_, t) => from + t),
        'i32',
      );
      inputs.push(ids, positions);
      const logits = decoder.extend({ ids, positions, T, mask: null, everyPosition: true });
      scoring.add(logits, from, T);
      last = logits.view(`${logits.name}[${T - 1}]`, (T - 1) * V, [1, V]);
    }
    // The sampler binds its logits: a row past the first may start where a binding cannot.
    this.lastLogits ??= e.tensor('rollout.scoredLastLogits', [1, V]);
    e.copy(last!, this.lastLogits);
    e.flush();
    for (const t of inputs) e.destroyTensor(t);
    return this.lastLogits;
  }

  destroy(): void {
    if (this.lastLogits) this.engine.destroyTensor(this.lastLogits);
    this.lastLogits = null;
    for (const d of this.decoders.values()) d.destroy();
    this.decoders.clear();
  }
}
