// The rollout's incremental decoders (the decode batch's, and the one continuous batching prefills newcomers
// in), kept between rollouts of the same or smaller size, and how a block of tokens goes into one of them.
import type { Engine, Tensor } from '../../engine/index.ts';
import { IncrementalDecoder, callSpans, callTokens } from '../../models/incremental-decoder.ts';
import type { PolicyWeights } from './types.ts';
import { scoredRowsPerCall, type PromptScoring } from './prompt-scoring.ts';
import { GrowingBuffers } from '../../models/growing-buffers.ts';

export class RolloutDecoders {
  /** The decode batch's decoder, and the one continuous batching prefills newcomers in. */
  private readonly decoders = new Map<'decode' | 'prefill', IncrementalDecoder>();
  /** The last prompt token's logits of a prefill that kept every position's (feedScored). */
  private lastLogits: Tensor | null = null;
  /** Each block call's ids and positions (blockInputs). */
  private readonly inputs: GrowingBuffers;

  constructor(
    readonly engine: Engine,
    readonly policy: PolicyWeights,
  ) {
    this.inputs = new GrowingBuffers(engine, 'rollout.block');
  }

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
    const spans = callSpans(ids[0].length, decoder.maxTokens);
    let logits: Tensor | null = null;
    for (const [k, [from, to]] of spans.entries()) {
      const block = (rows: number[][]) => rows.flatMap((row) => row.slice(from, to));
      const width = to - from;
      const input = { ...this.blockInputs(block(ids), block(positions)), T: width, mask: block(mask) };
      if (k + 1 < spans.length) decoder.append(input);
      else logits = decoder.extend(input);
    }
    return logits!;
  }

  /**
   * A block call's ids and positions, uploaded into two buffers kept for every call (a prefill per admission would
   * otherwise create and destroy two buffers, and bind them anew). An upload comes after the work recorded before it
   * (Engine.upload submits that work first), so a call's upload never overwrites what an earlier call reads.
   */
  private blockInputs(ids: number[], positions: number[]): { ids: Tensor<'u32'>; positions: Tensor<'i32'> } {
    const e = this.engine;
    const idsTensor = this.inputs.get('ids', [ids.length], 'u32');
    const positionsTensor = this.inputs.get('positions', [positions.length], 'i32');
    e.upload(idsTensor, ids);
    e.upload(positionsTensor, positions);
    return { ids: idsTensor, positions: positionsTensor };
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
    let last: Tensor | null = null;
    for (const [from, to] of callSpans(prompt.length, rows)) {
      const T = to - from;
      const inputs = this.blockInputs(
        prompt.slice(from, to),
        Array.from({ length: T }, (_, t) => from + t),
      );
      const logits = decoder.extend({ ...inputs, T, mask: null, everyPosition: true });
      scoring.add(logits, from, T);
      last = logits.view(`${logits.name}[${T - 1}]`, (T - 1) * V, [1, V]);
    }
    // The sampler binds its logits: a row past the first may start where a binding cannot.
    this.lastLogits ??= e.tensor('rollout.scoredLastLogits', [1, V]);
    e.copy(last!, this.lastLogits);
    return this.lastLogits;
  }

  destroy(): void {
    if (this.lastLogits) this.engine.destroyTensor(this.lastLogits);
    this.lastLogits = null;
    this.inputs.destroy();
    for (const d of this.decoders.values()) d.destroy();
    this.decoders.clear();
  }
}
