// The rollout phase: n responses per prompt generated on the GPU with a KV cache, returned in the layout PPO
// consumes (verl's DataProto fields). Samples decode in a fixed number of slots, as many as the device's binding
// limits and the memory budget allow (ppo/generation/slots.ts). Without an environment a response is one turn,
// decoded by continuous batching (ppo/generation/continuous-batching.ts); with one it grows turn by turn
// (ppo/generation/multi-turn.ts). Sampling runs on the GPU and writes each step's token straight into the next
// step's input; the old log-prob of each sampled token comes out of the sampler, computed from the same logits,
// so it equals a teacher-forced pass over the finished sequence.
import type { Engine, FloatDType } from '../../engine/index.ts';
import { RolloutWeights } from '../generation/rollout-weights.ts';
import type { HalfParameterCopy } from '../../models/half-parameter-copy.ts';
import {
  DEFAULT_READ_EVERY,
  checkRolloutConfig,
  type PolicyWeights,
  type RolloutBatch,
  type RolloutConfig,
  type TurnEnvironment,
} from '../generation/types.ts';
import { assemble, promptBatch } from '../generation/sample-records.ts';
import { rolloutSlots } from '../generation/slots.ts';
import { RolloutDecoders } from '../generation/decoders.ts';
import { continuousCacheCapacity, decodeContinuous } from '../generation/continuous-batching.ts';
import { BatchQueue } from '../generation/batch-queue.ts';
import { decodeMultiTurn, multiTurnCacheCapacity } from '../generation/multi-turn.ts';

/** Generates with a KV cache; keeps its caches and buffers between calls of the same or smaller size, until
 *  `release`. */
export class RolloutGenerator {
  /** The actor's weights in actor_rollout_ref.rollout.dtype (a half-precision copy and KV cache, or its own); null
   *  until a rollout needs them, and again after `release` unless kept. */
  private weights: RolloutWeights | null = null;
  /** The decoders over them; null until a rollout needs them, and again after `release`. */
  private decoders: RolloutDecoders | null = null;
  /** `release` keeps the half copy of a frozen LoRA base (the memory plan's keepsRolloutCopy): it never changes, so
   *  remaking it would convert the same values again at every rollout or validation. */
  keepsFrozenCopy = false;

  constructor(
    readonly engine: Engine,
    private readonly actor: PolicyWeights,
    private readonly dtype: FloatDType = 'f32',
    /** The actor's mixed-precision compute copy: decoded from when rollout.dtype is its dtype (never freed here). */
    private readonly computeCopy: HalfParameterCopy | null = null,
  ) {}

  /** The weights decoding reads, allocated (a half copy made from the actor) on first use. */
  private allocated(): { weights: RolloutWeights; decoders: RolloutDecoders } {
    this.weights ??= new RolloutWeights(this.engine, this.actor, this.dtype, this.computeCopy);
    this.decoders ??= new RolloutDecoders(this.engine, this.weights.policy);
    return { weights: this.weights, decoders: this.decoders };
  }

  /** n responses per prompt; with an environment, each a multi-turn conversation with it. */
  async generate(
    promptIds: readonly (readonly number[])[],
    c: RolloutConfig,
    environment: TurnEnvironment | null = null,
  ): Promise<RolloutBatch> {
    checkRolloutConfig(promptIds, c, this.actor.config.vocabSize, environment);
    const { weights, decoders } = this.allocated();
    weights.refresh();
    const prompts = promptBatch(promptIds, c);
    const R = c.maxResponseLength;
    const capacity = environment
      ? multiTurnCacheCapacity(prompts.P, R, environment.maxTurns)
      : continuousCacheCapacity(prompts.P, R, c.readEvery ?? DEFAULT_READ_EVERY);
    const slots = rolloutSlots(
      this.engine.caps,
      this.actor.config,
      {
        promptLength: prompts.P,
        capacity,
        samples: prompts.groupIds.length,
        cacheDtype: weights.dtype,
        // Multi-turn calls: the prompts, then blocks of at most R tokens (ppo/generation/multi-turn.ts).
        blockTokens: environment ? Math.max(prompts.P, R) : undefined,
        loraRank: this.actor.lora?.maxRank,
      },
      c,
    );
    if (environment)
      return assemble(prompts, await decodeMultiTurn(decoders, prompts, c, environment, slots, capacity), c);
    const queue = new BatchQueue(prompts, c);
    await decodeContinuous(
      decoders,
      queue,
      { ...c, P: prompts.P, R, processing: c.ignoreEos === true },
      slots,
      capacity,
    );
    return assemble(prompts, queue.records(), c);
  }

  /** Frees the decoders' caches and buffers and the half copy of the actor (verl's free_cache_engine: the rollout's
   *  sleep), except a frozen base's copy with keepsFrozenCopy; the next generate allocates them again, the copy
   *  remade from the actor's current weights. */
  release(): void {
    this.decoders?.destroy();
    this.decoders = null;
    if (this.keepsFrozenCopy && this.actor.lora) return;
    this.weights?.destroy();
    this.weights = null;
  }
}
