// Transposed copies Wᵀ (K, N) of weight matrices W (N, K) of a parameter arena: what the register matmul's nn
// path multiplies by on CPU devices (kernels/util/transpose.ts's variants), for the training forward (DecoderTrunk)
// and for decode steps (IncrementalDecoder). Both take the same set for the same arena (acquire): at
// Qwen3-0.6B's shapes in float32 one set is ~1.6 GiB, so the actor's trunk and its rollout must not keep one each.
// The weights change only when something writes the arena (an optimizer step, an upload, a checkpoint load), not
// between the micro-batches of a mini-batch or the steps of a rollout, so a copy is remade only when the engine
// has recorded a write into its weight's buffer (or into the copy) since it was last made.
import type { Engine, Tensor, Arena } from '../engine/index.ts';
import { transpose } from '../kernels/util/transpose.ts';
import { GrowingBuffers } from './growing-buffers.ts';

/** The set of each arena that some model holds. */
const shared = new WeakMap<Arena, TransposedWeights>();

export class TransposedWeights {
  private readonly buffers: GrowingBuffers;
  /** Per weight: the engine's write counts of its buffer and of its copy when the copy was made. */
  private readonly madeAt = new Map<string, readonly [number, number]>();
  private holders = 0;

  private constructor(
    private readonly engine: Engine,
    private readonly params: Arena,
  ) {
    this.buffers = new GrowingBuffers(engine, 'weightsT');
  }

  /** The copies of `params`, shared with every other holder of the same arena; release() when done. */
  static acquire(engine: Engine, params: Arena): TransposedWeights {
    let set = shared.get(params);
    if (!set) {
      set = new TransposedWeights(engine, params);
      shared.set(params, set);
    }
    set.holders++;
    return set;
  }

  /** Drops this holder's claim; the last one frees the copies. */
  release(): void {
    if (--this.holders > 0) return;
    this.buffers.destroy();
    this.madeAt.clear();
    shared.delete(this.params);
  }

  /** Whether every weight of `names` binds whole (one buffer, one binding). A larger one is multiplied by matmul in
   *  windows of its rows (nt), which its copy's nn product could not take with a decode step's prologue or fused
   *  layer (a window of Wᵀ's rows splits the reduction); the transpose binds both whole too. Then the caller
   *  multiplies every weight as stored, not a mix (the decode step's layout choices are made once). */
  bindsWhole(names: readonly string[]): boolean {
    return names.every((name) => {
      const weight = this.params.get(name);
      return weight.parts.length === 1 && weight.byteLength <= this.engine.maxBindingBytes;
    });
  }

  /** The copy of the weight `name`; current once refresh() has listed it. */
  copy(name: string): Tensor {
    const [N, K] = this.params.get(name).shape;
    return this.buffers.get(name, [K, N]);
  }

  /** Brings the copies of the weights `names` up to date. */
  refresh(names: readonly string[]): void {
    for (const name of names) {
      const weight = this.params.get(name);
      const copy = this.copy(name);
      const made = this.madeAt.get(name);
      if (made && made[0] === this.engine.writeCount(weight) && made[1] === this.engine.writeCount(copy)) continue;
      const [N, K] = weight.shape;
      transpose(this.engine, { x: weight, out: copy, rows: N, cols: K });
      this.madeAt.set(name, [this.engine.writeCount(weight), this.engine.writeCount(copy)]);
    }
  }
}
