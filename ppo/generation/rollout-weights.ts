// The weights the rollout decodes with, in actor_rollout_ref.rollout.dtype (verl's key: vLLM and SGLang serve the
// policy in bfloat16 by default). float32 decodes with the actor's own arena and a float32 KV cache. bfloat16 or
// float16 keep a half-precision KV cache (half the bytes: twice the sequences decode at once, and a decode step
// reads half the cache) and decode with a half-precision copy of the actor's float32 matrices, remade from the
// actor before a rollout whenever the actor's weights were written since (each actor update, a checkpoint load):
// the engine's write counts say so, as for the transposed copies. A LoRA base already stored in half precision,
// NF4 or int8 is decoded as stored (it is frozen: nothing to refresh) and its adapters stay float32. The training
// forward stays float32, so the old log-probs it recomputes differ from the sampler's by the rounding: the run keeps
// both and reports rollout_corr/* as for rollout servers (ppo/step-plan.ts).
import type { Arena, Engine, FloatDType, HalfDType } from '../../engine/index.ts';
import { layerWeightsAreF32 } from '../../models/weight-operand.ts';
import { copyParameter, frozenParameterCopy } from '../../models/parameter-store.ts';
import type { PolicyWeights } from './types.ts';

export class RolloutWeights {
  /** The half-precision copy of the actor's matrices, when the rollout makes one. */
  private readonly copy: Arena | null;
  /** Per tensor of the copy: the engine's write count of its actor buffer when it was last converted. */
  private readonly madeAt = new Map<string, number>();
  readonly policy: PolicyWeights;

  constructor(
    private readonly engine: Engine,
    private readonly actor: PolicyWeights,
    readonly dtype: FloatDType,
  ) {
    this.copy =
      dtype !== 'f32' && layerWeightsAreF32(actor.params)
        ? frozenParameterCopy(engine, actor.config, actor.params, 'rollout', dtype as HalfDType)
        : null;
    if (this.copy)
      for (const name of this.copy.names()) this.madeAt.set(name, engine.writeCount(actor.params.get(name)));
    this.policy = { ...actor, params: this.copy ?? actor.params, cacheDtype: dtype };
  }

  /** Brings the copy up to date with the actor's weights (before each rollout). */
  refresh(): void {
    if (!this.copy) return;
    for (const name of this.copy.names()) {
      const written = this.engine.writeCount(this.actor.params.get(name));
      if (this.madeAt.get(name) === written) continue;
      copyParameter(this.engine, this.actor.params, this.copy, name);
      this.madeAt.set(name, written);
    }
  }

  destroy(): void {
    if (this.copy) for (const buffer of this.copy.buffers) this.engine.destroyTensor(buffer);
  }
}
