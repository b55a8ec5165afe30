// A half-precision (bf16/f16) copy of a float32 parameter arena that is kept current: what reads the weights in
// half precision while the optimizer updates the float32 master weights — the rollout's decode weights
// (actor_rollout_ref.rollout.dtype) and a trained model's compute weights (fsdp_config.dtype, mixed precision). The
// weights change only when something writes the arena (an optimizer step, an upload, a checkpoint load), so a tensor
// is converted again only when the engine has recorded a write into its master buffer since it was last converted.
import type { Arena, Engine, HalfDType } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { copyParameter, frozenParameterCopy } from './parameter-store.ts';

export class HalfParameterCopy {
  /** The copy: matrices in `dtype`, norms, biases and score heads float32 (models/parameter-layout.ts). */
  readonly params: Arena;
  /** Per tensor: the engine's write count of its master buffer when it was last converted. */
  private readonly madeAt = new Map<string, number>();

  constructor(
    private readonly engine: Engine,
    config: DecoderConfig,
    private readonly master: Arena,
    label: string,
    readonly dtype: HalfDType,
  ) {
    this.params = frozenParameterCopy(engine, config, master, label, dtype);
    for (const name of this.params.names()) this.madeAt.set(name, engine.writeCount(master.get(name)));
  }

  /** Converts each tensor whose master was written since its last conversion. */
  refresh(): void {
    for (const name of this.params.names()) {
      const written = this.engine.writeCount(this.master.get(name));
      if (this.madeAt.get(name) === written) continue;
      copyParameter(this.engine, this.master, this.params, name);
      this.madeAt.set(name, written);
    }
  }

  destroy(): void {
    for (const buffer of this.params.buffers) this.engine.destroyTensor(buffer);
  }
}
