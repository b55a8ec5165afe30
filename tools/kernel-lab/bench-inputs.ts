// What the per-op bench cases (tools/kernel-lab/<op>.bench.ts) share: the case shape `node tools/bench.js kernels`
// runs, the benchmark model's batch, and seeded inputs.
import { type Engine, type Tensor, seededRandom } from '../../engine/index.ts';
import { BENCH_TINY } from '../../models/presets.ts';

export interface KernelBenchCase {
  /** Op name as WEBGPU_KERNEL_VARIANTS knows it. */
  op: string;
  /** Row label (op plus what distinguishes the case, e.g. its layout). */
  kernel: string;
  shape: string;
  /** Floating-point operations of one run, for GFLOP/s (where they dominate: matmul, attention, LM head). */
  flops?: number;
  /** Bytes of one run, for GB/s: each input read and each output written once. */
  bytes?: number;
  /** Variant to time as the baseline under the same inputs, for vs_naive. */
  naiveVariant?: string;
  /** The same computation by the op's CPU reference on the inputs setup uploads, timed for vs_cpu. */
  reference?: () => unknown;
  /** Whether the case runs on this device (a CPU-only kernel); every device when absent. */
  runsOn?: (engine: Engine) => boolean;
  /** Allocates the inputs once and returns the function that records one run. */
  setup: (engine: Engine) => () => void;
}

export const F32_BYTES = 4;
export const MODEL = BENCH_TINY;
/** Sequences and tokens per sequence of the model kernels' batch. */
export const B = 8;
export const T = 128;
export const ROWS = B * T;
/** Sequences and response tokens of the PPO kernels. */
export const PPO_B = 256;
export const PPO_T = 128;

/** Seeded values uniform in [-scale, scale): the inputs a case uploads and hands its CPU reference. */
export function randomValues(n: number, seed: number, scale = 1): Float32Array {
  const random = seededRandom(seed);
  return Float32Array.from({ length: n }, () => scale * (2 * random() - 1));
}

export function randomIds(n: number, seed: number, V: number): Uint32Array {
  const random = seededRandom(seed);
  return Uint32Array.from({ length: n }, () => Math.floor(random() * V));
}

/** Response masks [PPO_B, PPO_T] with lengths spread over [PPO_T/4, PPO_T], as a rollout's are. */
export function responseMask(seed: number): Float32Array {
  const random = seededRandom(seed);
  const mask = new Float32Array(PPO_B * PPO_T);
  for (let b = 0; b < PPO_B; b++) {
    const length = Math.ceil((0.25 + 0.75 * random()) * PPO_T);
    mask.fill(1, b * PPO_T, b * PPO_T + length);
  }
  return mask;
}

export function upload(engine: Engine, name: string, data: Float32Array): Tensor {
  return engine.tensorFrom(`bench-${name}`, [data.length], data);
}
