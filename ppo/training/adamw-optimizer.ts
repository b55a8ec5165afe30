// AdamW over a parameter arena: gradients and both moments are arenas of the same layout, so one fused kernel
// per segment updates everything, after a global-norm clip computed on the GPU (no readback).
import { Arena, type Engine, type Tensor } from '../../engine/index.ts';
import { adamwStep, gradNormSquared } from '../../kernels/optim/adamw.ts';

export interface AdamWConfig {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  /** Global gradient-norm clip (verl's `grad_clip`); ≤ 0 disables it. */
  maxGradNorm: number;
}

/** Both moments per parameter tensor, by the arena's tensor name (as PyTorch keeps state per parameter), so a
 *  state saved on one device loads on another whose binding limit packs the arena differently. */
export interface AdamWState {
  step: number;
  m: ReadonlyMap<string, Float32Array>;
  v: ReadonlyMap<string, Float32Array>;
}

export class AdamWOptimizer {
  readonly grads: Arena;
  private readonly m: Arena;
  private readonly v: Arena;
  /** ‖g‖² of the last step, on the GPU; read it only when a metric needs it. */
  readonly normSquared: Tensor;
  stepCount = 0;

  constructor(
    private readonly engine: Engine,
    readonly params: Arena,
    readonly config: AdamWConfig,
    /** Runs on the gradients before their norm and the update (LoRA: clears the entries held at zero). */
    private readonly prepareGradients: ((grads: Arena) => void) | null = null,
  ) {
    // Trained weights are float32 master copies; half-precision arenas belong to frozen models.
    const half = params.layout.slots.find((slot) => slot.dtype !== 'f32');
    if (half)
      throw new Error(
        `AdamW over ${params.label}: tensor ${half.name} is ${half.dtype}; a trained model's weights must be float32`,
      );
    this.grads = new Arena(engine, `${params.label}.grad`, params.layout);
    this.m = new Arena(engine, `${params.label}.adam_m`, params.layout);
    this.v = new Arena(engine, `${params.label}.adam_v`, params.layout);
    this.normSquared = engine.tensor(`${params.label}.grad_norm_sq`, [1]);
  }

  /** Forgets both moments and the step count: the next step starts as a new optimizer's first. */
  reset(): void {
    for (const segment of [...this.m.segments, ...this.v.segments]) this.engine.clear(segment);
    this.stepCount = 0;
  }

  zeroGrad(): void {
    for (const segment of this.grads.segments) this.engine.clear(segment);
  }

  /** Clips by global norm and applies one AdamW update; `gradScale` first multiplies the gradients. */
  step(lr = this.config.lr, gradScale = 1): void {
    this.stepCount++;
    this.prepareGradients?.(this.grads);
    gradNormSquared(this.engine, { grads: this.grads.segments, normSquared: this.normSquared });
    this.params.segments.forEach((params, i) => {
      adamwStep(this.engine, {
        params,
        grads: this.grads.segments[i],
        m: this.m.segments[i],
        v: this.v.segments[i],
        normSquared: this.normSquared,
        maxNorm: this.config.maxGradNorm,
        lr,
        beta1: this.config.betas[0],
        beta2: this.config.betas[1],
        eps: this.config.eps,
        weightDecay: this.config.weightDecay,
        step: this.stepCount,
        gradScale,
      });
    });
  }

  /** The last step's global gradient norm (one read-back: the SFT and reward-model jobs log it per step; the PPO
   *  updates read theirs from the device metric log instead). */
  async gradNorm(): Promise<number> {
    const [sq] = await this.engine.read(this.normSquared);
    return Math.sqrt(sq);
  }

  async saveState(): Promise<AdamWState> {
    const read = async (arena: Arena) =>
      new Map(
        await Promise.all(arena.names().map(async (name) => [name, await this.engine.read(arena.get(name))] as const)),
      );
    return { step: this.stepCount, m: await read(this.m), v: await read(this.v) };
  }

  /** Alignment padding between tensors holds zero moments; reset() first keeps it so. */
  loadState(state: AdamWState): void {
    this.reset();
    this.stepCount = state.step;
    for (const [moments, arena] of [
      [state.m, this.m],
      [state.v, this.v],
    ] as const) {
      for (const name of arena.names()) {
        const data = moments.get(name);
        if (!data) throw new Error(`optimizer state: no moments for ${name}`);
        this.engine.upload(arena.get(name), data);
      }
    }
  }
}
