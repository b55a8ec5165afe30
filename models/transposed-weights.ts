// Transposed copies Wᵀ (K, N) of weight matrices W (N, K) of a parameter arena: what the register matmul's nn
// path multiplies by on CPU devices (kernels/transpose.ts's variants), for the training forward (DecoderTrunk)
// and for decode steps (IncrementalDecoder). The weights change only when something writes the arena (an
// optimizer step, an upload, a checkpoint load), not between the micro-batches of a mini-batch or the steps of a
// rollout, so the copies are remade only when the engine has recorded a write into a parameter buffer (or into a
// copy: a new or overwritten one) since they were last made.
import type { Engine, Tensor, Arena } from '../engine/index.ts';
import { transpose } from '../kernels/transpose.ts';
import type { GrowingBuffers } from './growing-buffers.ts';

export class TransposedWeights {
  /** version() when the copies were last made; null: never made. */
  private madeAt: number[] | null = null;

  constructor(
    private readonly engine: Engine,
    private readonly params: Arena,
    /** Holds the copies, under `weightsT.<weight name>`. */
    private readonly buffers: GrowingBuffers,
  ) {}

  /** The copy of the weight `name`; current once refresh() has listed it. */
  copy(name: string): Tensor {
    const [N, K] = this.params.get(name).shape;
    return this.buffers.get(`weightsT.${name}`, [K, N]);
  }

  /** The engine's write counts of the parameter buffers and of the copies. */
  private version(names: readonly string[]): number[] {
    return [...this.params.buffers, ...names.map((name) => this.copy(name))].map((t) => this.engine.writeCount(t));
  }

  /** Brings the copies of the weights `names` (the same list each call) up to date. */
  refresh(names: readonly string[]): void {
    const version = this.version(names);
    if (this.madeAt && version.length === this.madeAt.length && version.every((count, i) => count === this.madeAt![i])) return;
    for (const name of names) {
      const weight = this.params.get(name);
      const [N, K] = weight.shape;
      transpose(this.engine, { x: weight, out: this.copy(name), rows: N, cols: K });
    }
    this.madeAt = this.version(names);
  }
}
