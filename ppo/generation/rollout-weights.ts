// The weights the rollout decodes with, in actor_rollout_ref.rollout.dtype (verl's key: vLLM and SGLang serve the
// policy in bfloat16 by default). float32 decodes with the actor's own arena and a float32 KV cache. bfloat16 or
// float16 keep a half-precision KV cache (half the bytes: twice the sequences decode at once, and a decode step
// reads half the cache) and decode with a half-precision copy of the actor's float32 matrices, remade from the
// actor before a rollout whenever the actor's weights were written since (each actor update, a checkpoint load):
// the engine's write counts say so, as for the transposed copies. A LoRA base already stored in half precision,
// NF4 or int8 is decoded as stored (it is frozen: nothing to refresh) and its adapters stay float32. The training
// forward stays float32, so the old log-probs it recomputes differ from the sampler's by the rounding: the run keeps
// both and reports rollout_corr/* as for rollout servers (ppo/step-plan.ts). Under mixed precision in the same dtype
// (fsdp_config.dtype) the actor's compute copy holds the same values: the rollout decodes from it, no second copy.
import type { Engine, FloatDType, HalfDType } from '../../engine/index.ts';
import { layerWeightsAreF32 } from '../../models/weight-operand.ts';
import { HalfParameterCopy } from '../../models/half-parameter-copy.ts';
import type { PolicyWeights } from './types.ts';

export class RolloutWeights {
  /** The half-precision copy of the actor's matrices the rollout decodes from, when it needs one. */
  private readonly copy: HalfParameterCopy | null;
  /** Whether this made the copy (else it is the actor's compute copy, which the actor's trunk owns). */
  private readonly ownsCopy: boolean;
  readonly policy: PolicyWeights;

  constructor(
    engine: Engine,
    actor: PolicyWeights,
    readonly dtype: FloatDType,
    /** The actor's mixed-precision compute copy, if it has one. */
    computeCopy: HalfParameterCopy | null = null,
  ) {
    const needsCopy = dtype !== 'f32' && layerWeightsAreF32(actor.params);
    this.ownsCopy = needsCopy && computeCopy?.dtype !== dtype;
    this.copy = !needsCopy
      ? null
      : this.ownsCopy
        ? new HalfParameterCopy(engine, actor.config, actor.params, 'rollout', dtype as HalfDType)
        : computeCopy;
    this.policy = { ...actor, params: this.copy?.params ?? actor.params, cacheDtype: dtype };
  }

  /** Brings the copy up to date with the actor's weights (before each rollout). */
  refresh(): void {
    this.copy?.refresh();
  }

  destroy(): void {
    if (this.ownsCopy) this.copy?.destroy();
  }
}
