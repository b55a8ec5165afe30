// AdamW over a parameter arena: gradients and both moments are arenas of the same layout, so one fused kernel
// per segment updates everything, after a global-norm clip computed on the GPU (no readback).
// AdamW8bit (bitsandbytes' blockwise 8-bit state, kernels/optim/adamw8bit.wgsl) keeps each tensor of at least
// MIN_8BIT_SIZE values as one byte per moment plus a float32 scale per 256 values, in an arena of its own, and the
// smaller tensors' moments in float32 arenas of just those tensors; it updates tensor by tensor, as bitsandbytes does.
// With `offload` (verl's fsdp_config.optimizer_offload) either kind of moments lives in host memory instead and
// each step streams it through one staging buffer (offloaded-moments.ts): the same kernels, the same update.
import { Arena, type ArenaEntry, type Engine, type Tensor, elementCount } from '../../engine/index.ts';
import { adamwStep, gradNormSquared } from '../../kernels/optim/adamw.ts';
import { adamw8bitSizes, adamw8bitStep } from '../../kernels/optim/adamw8bit.ts';
import { MIN_8BIT_SIZE, createDynamicMap } from '../../engine/dynamic-map.ts';
import { OFFLOAD_STAGING_BYTES, OffloadedMoments, stagingBytes } from './offloaded-moments.ts';

export interface AdamWConfig {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  /** Global gradient-norm clip (verl's `grad_clip`); ≤ 0 disables it. */
  maxGradNorm: number;
  /** verl's `optim.optimizer`: torch.optim's AdamW (default) or bitsandbytes.optim's AdamW8bit. */
  optimizer?: OptimizerName;
  /** verl's fsdp_config.optimizer_offload: the moments in host memory, streamed through the device per update. */
  offload?: boolean;
  /** Offload: the staging buffer's most bytes (OFFLOAD_STAGING_BYTES; tests ask for less, to update in many fills). */
  offloadStagingBytes?: number;
}

export type OptimizerName = 'AdamW' | 'AdamW8bit';

/** One tensor's 8-bit moments as bitsandbytes keeps them: codes (four per u32 word, element 4w+j in byte j) and a
 *  float32 absmax per block of 256. */
export interface QuantizedMoments {
  state1: Uint32Array;
  state2: Uint32Array;
  absmax1: Float32Array;
  absmax2: Float32Array;
}

/** Both moments per parameter tensor, by the arena's tensor name (as PyTorch keeps state per parameter), so a
 *  state saved on one device loads on another whose binding limit packs the arena differently. Under AdamW8bit,
 *  `quantized` holds the tensors of at least MIN_8BIT_SIZE values and m/v the others. */
export interface AdamWState {
  step: number;
  m: ReadonlyMap<string, Float32Array>;
  v: ReadonlyMap<string, Float32Array>;
  quantized?: ReadonlyMap<string, QuantizedMoments>;
}

const QUANTIZED_PARTS = ['state1', 'state2', 'absmax1', 'absmax2'] as const;

/** Which tensors of a parameter layout AdamW8bit keeps in 8 bits (bitsandbytes' min_8bit_size rule). */
export function eightBitTensors(entries: readonly ArenaEntry[]): ArenaEntry[] {
  return entries.filter((e) => elementCount(e.shape) >= MIN_8BIT_SIZE);
}

/** Bytes of both moments of `entries` (a trained model's float32 tensors): 8 per value, or under AdamW8bit, for
 *  each tensor of at least MIN_8BIT_SIZE values, its code words and block scales (2 bytes per value + 8 per 256). */
export function momentBytes(entries: readonly ArenaEntry[], optimizer: OptimizerName = 'AdamW'): number {
  const eightBit = new Set(optimizer === 'AdamW8bit' ? eightBitTensors(entries) : []);
  return entries.reduce((sum, e) => {
    const n = elementCount(e.shape);
    if (!eightBit.has(e)) return sum + 2 * 4 * n;
    const { words, blocks } = adamw8bitSizes(n);
    return sum + 2 * 4 * (words + blocks);
  }, 0);
}

/** Device bytes of the staging buffer an offloaded optimizer of `entries` allocates: all their moments, or at most
 *  `limitBytes` and one binding. */
export function offloadStagingBytes(
  entries: readonly ArenaEntry[],
  optimizer: OptimizerName,
  maxBindingBytes: number,
  limitBytes = OFFLOAD_STAGING_BYTES,
): number {
  const eightBit = new Set(optimizer === 'AdamW8bit' ? eightBitTensors(entries).map((e) => e.name) : []);
  return stagingBytes(entries, eightBit, Math.min(limitBytes, maxBindingBytes));
}

export class AdamWOptimizer {
  readonly grads: Arena;
  /** Float32 moments: of every tensor (AdamW), of the tensors below MIN_8BIT_SIZE (AdamW8bit; null if none). */
  private readonly m: Arena | null;
  private readonly v: Arena | null;
  /** AdamW8bit: `${name}.state1` … `${name}.absmax2` per 8-bit tensor, and the two codes (signed, unsigned). */
  private readonly quantized: { arena: Arena; names: string[]; qmap: Tensor } | null = null;
  /** Offload: every moment in host memory (m, v, quantized above stay null); the qmap stays on the device. */
  private readonly offloaded: { moments: OffloadedMoments; qmap: Tensor | null } | null = null;
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
    this.normSquared = engine.tensor(`${params.label}.grad_norm_sq`, [1]);
    const eightBit = config.optimizer === 'AdamW8bit';
    const qmap = () =>
      engine.tensorFrom(`${params.label}.qmap`, [512], [...createDynamicMap(true), ...createDynamicMap(false)]);
    if (config.offload) {
      this.m = this.v = null;
      const names = new Set(eightBit ? eightBitTensors(params.layout.slots).map((e) => e.name) : []);
      const bytes = offloadStagingBytes(
        params.layout.slots,
        config.optimizer ?? 'AdamW',
        engine.maxBindingBytes,
        config.offloadStagingBytes,
      );
      const moments = new OffloadedMoments(engine, params, this.grads, names, eightBit ? 'after' : 'before', bytes);
      this.offloaded = { moments, qmap: eightBit ? qmap() : null };
    } else if (eightBit) {
      const quantizedEntries = eightBitTensors(params.layout.slots);
      const names = quantizedEntries.map((e) => e.name);
      const small = params.layout.slots.filter((slot) => !names.includes(slot.name));
      const smallLayout = small.length > 0 ? Arena.plan(engine, small) : null;
      this.m = smallLayout && new Arena(engine, `${params.label}.adam_m`, smallLayout);
      this.v = smallLayout && new Arena(engine, `${params.label}.adam_v`, smallLayout);
      const entries = quantizedEntries.flatMap(({ name, shape }) => {
        const { words, blocks } = adamw8bitSizes(elementCount(shape));
        return [
          { name: `${name}.state1`, shape: [words], dtype: 'u32' as const },
          { name: `${name}.state2`, shape: [words], dtype: 'u32' as const },
          { name: `${name}.absmax1`, shape: [blocks] },
          { name: `${name}.absmax2`, shape: [blocks] },
        ];
      });
      const arena = new Arena(engine, `${params.label}.adam_8bit`, Arena.plan(engine, entries));
      this.quantized = { arena, names, qmap: qmap() };
    } else {
      this.m = new Arena(engine, `${params.label}.adam_m`, params.layout);
      this.v = new Arena(engine, `${params.label}.adam_v`, params.layout);
    }
  }

  /** Forgets both moments and the step count: the next step starts as a new optimizer's first. */
  reset(): void {
    this.offloaded?.moments.reset();
    for (const arena of [this.m, this.v, this.quantized?.arena]) {
      for (const segment of arena?.segments ?? []) this.engine.clear(segment);
    }
    this.stepCount = 0;
  }

  zeroGrad(): void {
    for (const segment of this.grads.segments) this.engine.clear(segment);
  }

  /** Clips by global norm and applies one AdamW update; `gradScale` first multiplies the gradients. Resident, it
   *  only records dispatches; offloaded, it resolves when the moments are back in host memory. */
  async step(lr = this.config.lr, gradScale = 1): Promise<void> {
    this.stepCount++;
    this.prepareGradients?.(this.grads);
    gradNormSquared(this.engine, { grads: this.grads.segments, normSquared: this.normSquared });
    const hyper = {
      normSquared: this.normSquared,
      maxNorm: this.config.maxGradNorm,
      lr,
      beta1: this.config.betas[0],
      beta2: this.config.betas[1],
      eps: this.config.eps,
      weightDecay: this.config.weightDecay,
      step: this.stepCount,
      gradScale,
    };
    if (this.offloaded) return this.offloaded.moments.step(hyper, this.offloaded.qmap);
    if (!this.quantized) {
      this.params.segments.forEach((params, i) => {
        adamwStep(this.engine, {
          params,
          grads: this.grads.segments[i],
          m: this.m!.segments[i],
          ...hyper,
          v: this.v!.segments[i],
        });
      });
      return;
    }
    const { arena, names, qmap } = this.quantized;
    // Per tensor, padded to whole vec4s (arena slots are 64-aligned, so the padding is the tensor's own).
    const padded = (t: Tensor) => t.view(t.name, 0, [Math.ceil(t.size / 4) * 4]);
    for (const name of this.params.names()) {
      const [params, grads] = [padded(this.params.get(name)), padded(this.grads.get(name))];
      if (names.includes(name)) {
        adamw8bitStep(this.engine, {
          params,
          grads,
          state1: arena.words(`${name}.state1`),
          state2: arena.words(`${name}.state2`),
          absmax1: arena.get(`${name}.absmax1`),
          absmax2: arena.get(`${name}.absmax2`),
          qmap,
          count: this.params.get(name).size,
          ...hyper,
        });
      } else {
        const [m, v] = [padded(this.m!.get(name)), padded(this.v!.get(name))];
        adamwStep(this.engine, { params, grads, m, v, ...hyper, decay: 'after' });
      }
    }
  }

  /** The last step's global gradient norm (one read-back: the SFT and reward-model jobs log it per step; the PPO
   *  updates read theirs from the device metric log instead). */
  async gradNorm(): Promise<number> {
    const [sq] = await this.engine.read(this.normSquared);
    return Math.sqrt(sq);
  }

  /** The step count and moments. Offloaded, the moments are the optimizer's own host arrays, not a copy (a save of
   *  Qwen3-1.7B's would otherwise hold 13 GB twice): write them out before the next step or loadState changes them. */
  async saveState(): Promise<AdamWState> {
    if (this.offloaded) {
      const { m, v, quantized } = this.offloaded.moments;
      return { step: this.stepCount, m, v, ...(quantized.size > 0 && { quantized }) };
    }
    const read = async (arena: Arena | null) =>
      new Map(
        await Promise.all(
          (arena?.names() ?? []).map(async (name) => [name, await this.engine.read(arena!.get(name))] as const),
        ),
      );
    const state = { step: this.stepCount, m: await read(this.m), v: await read(this.v) };
    if (!this.quantized) return state;
    const { arena, names } = this.quantized;
    const quantized = new Map<string, QuantizedMoments>();
    for (const name of names) {
      quantized.set(name, {
        state1: await this.engine.read(arena.words(`${name}.state1`)),
        state2: await this.engine.read(arena.words(`${name}.state2`)),
        absmax1: await this.engine.read(arena.get(`${name}.absmax1`)),
        absmax2: await this.engine.read(arena.get(`${name}.absmax2`)),
      });
    }
    return { ...state, quantized };
  }

  /** Alignment padding between tensors holds zero moments; reset() first keeps it so. */
  loadState(state: AdamWState): void {
    const mine = this.quantized?.names ?? [...(this.offloaded?.moments.quantized.keys() ?? [])];
    const theirs = [...(state.quantized?.keys() ?? [])];
    if (mine.length !== theirs.length || mine.some((name) => !state.quantized?.has(name)))
      throw new Error(
        `optimizer state: saved by ${theirs.length > 0 ? 'AdamW8bit' : 'AdamW'} (8-bit moments for ` +
          `${theirs.length} tensors), this run's ${this.config.optimizer ?? 'AdamW'} keeps ${mine.length} in 8 bits: ` +
          'resume with the optimizer the checkpoint was trained with',
      );
    this.reset();
    this.stepCount = state.step;
    if (this.offloaded) {
      const { m, v, quantized } = this.offloaded.moments;
      for (const [saved, host] of [
        [state.m, m],
        [state.v, v],
      ] as const) {
        for (const [name, target] of host) target.set(checkedLength(saved.get(name), target.length, name));
      }
      for (const [name, target] of quantized) {
        const saved = state.quantized!.get(name)!;
        for (const part of QUANTIZED_PARTS)
          (target[part] as Float32Array).set(checkedLength(saved[part], target[part].length, `${part} of ${name}`));
      }
      return;
    }
    for (const [moments, arena] of [
      [state.m, this.m],
      [state.v, this.v],
    ] as const) {
      for (const name of arena?.names() ?? []) {
        const data = moments.get(name);
        if (!data) throw new Error(`optimizer state: no moments for ${name}`);
        this.engine.upload(arena!.get(name), data);
      }
    }
    for (const name of mine) {
      const saved = state.quantized!.get(name)!;
      const arena = this.quantized!.arena;
      for (const part of QUANTIZED_PARTS) {
        const target = part.startsWith('state') ? arena.words(`${name}.${part}`) : arena.get(`${name}.${part}`);
        if (saved[part].length !== target.size)
          throw new Error(
            `optimizer state: ${part} of ${name} has ${saved[part].length} values, expected ${target.size}`,
          );
        this.engine.upload(target, saved[part]);
      }
    }
  }
}

/** A saved moment array of the expected length (a checkpoint of another model is refused in one line). */
function checkedLength<T extends Float32Array | Uint32Array>(data: T | undefined, size: number, what: string): T {
  if (!data) throw new Error(`optimizer state: no moments for ${what}`);
  if (data.length !== size) throw new Error(`optimizer state: ${what} has ${data.length} values, expected ${size}`);
  return data;
}
