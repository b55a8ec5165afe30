// The rollout's incremental decoders (the decode batch's, and the one continuous batching prefills newcomers
// in), kept between rollouts of the same or smaller size, and how a block of tokens goes into one of them.
import type { Engine, Tensor } from '../../engine/index.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import type { PolicyWeights } from './types.ts';

export class RolloutDecoders {
  /** The decode batch's decoder, and the one continuous batching prefills newcomers in. */
  private readonly decoders = new Map<'decode' | 'prefill', IncrementalDecoder>();

  constructor(
    readonly engine: Engine,
    readonly policy: PolicyWeights,
  ) {}

  /** `maxTokens`: the most tokens one call appends (1 for a cache whose rows are prefilled elsewhere). */
  decoderFor(role: 'decode' | 'prefill', rows: number, capacity: number, maxTokens: number): IncrementalDecoder {
    const d = this.decoders.get(role);
    if (d && d.cache.maxRows >= rows && d.cache.capacity >= capacity && d.maxTokens >= maxTokens) return d;
    d?.destroy();
    const fresh = new IncrementalDecoder(this.engine, this.policy.config, this.policy.params, {
      maxRows: rows,
      capacity,
      lora: this.policy.lora,
      cacheDtype: this.policy.cacheDtype,
      maxTokens,
    });
    this.decoders.set(role, fresh);
    return fresh;
  }

  /** Appends a (rows, T) block of tokens to the cache; returns the logits of each row's last token. */
  feedBlock(decoder: IncrementalDecoder, ids: number[][], mask: number[][], positions: number[][]): Tensor {
    const e = this.engine;
    const T = ids[0].length;
    const idsTensor = e.tensorFrom('rollout.blockIds', [ids.length * T], ids.flat(), 'u32');
    const positionsTensor = e.tensorFrom('rollout.blockPositions', [ids.length * T], positions.flat(), 'i32');
    const logits = decoder.extend({ ids: idsTensor, positions: positionsTensor, T, mask: mask.flat() });
    e.flush();
    e.destroyTensor(idsTensor);
    e.destroyTensor(positionsTensor);
    return logits;
  }

  destroy(): void {
    for (const d of this.decoders.values()) d.destroy();
    this.decoders.clear();
  }
}
