// What the per-op bench cases (tools/kernel-lab/<op>.bench.ts) share: the case shape `node tools/bench.js kernels`
// runs, the benchmark model's batch, and seeded inputs.
import { type Engine, type Tensor, seededRandom } from '../../engine/index.ts';
import { BENCH_TINY } from '../../models/presets.ts';
import { maxViolation } from './compare.ts';

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
  /**
   * Allocates the inputs once and returns the function that records one run, with the check of what one run wrote
   * (a run from the state setup leaves) against the CPU or float64 reference at this shape.
   */
  setup: (engine: Engine) => { run: () => void; check: () => Promise<BenchCheck> };
}

/** How far one run's output is from its reference: maxViolation (tools/kernel-lab/compare.ts), ≤ 1 passes. */
export interface BenchCheck {
  /** What was compared, named as the kernel names its output ("out", "dx"). */
  output: string;
  violation: number;
  /** The largest absolute difference, for the error line. */
  maxAbsError: number;
  tolerance: string;
}

/** The worst of several outputs' checks: [output, tensor, expected, atol, rtol] each. */
export async function checkOutputs(
  engine: Engine,
  outputs: [string, Tensor, ArrayLike<number>, number, number][],
): Promise<BenchCheck> {
  const checks = [];
  for (const [output, tensor, expected, atol, rtol] of outputs)
    checks.push(await checkOutput(engine, output, tensor, expected, atol, rtol));
  return checks.reduce((worst, c) => (c.violation > worst.violation ? c : worst));
}

/** A check of `tensor` against `expected` (its reference at the case's shape) to atol + rtol·|expected|. */
export async function checkOutput(
  engine: Engine,
  output: string,
  tensor: Tensor,
  expected: ArrayLike<number>,
  atol: number,
  rtol: number,
): Promise<BenchCheck> {
  return checkValues(output, await engine.read(tensor), expected, atol, rtol);
}

/** checkOutput of values already read (a tensor's chosen elements). */
export function checkValues(
  output: string,
  got: ArrayLike<number>,
  expected: ArrayLike<number>,
  atol: number,
  rtol: number,
): BenchCheck {
  let maxAbsError = 0;
  for (let i = 0; i < expected.length; i++) maxAbsError = Math.max(maxAbsError, Math.abs(got[i] - expected[i]) || 0);
  return {
    output,
    violation: maxViolation(firstValues(got, expected.length), expected, atol, rtol),
    maxAbsError,
    tolerance: `atol ${atol}, rtol ${rtol}`,
  };
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

/** The first n of `values` without copying a typed array: an array copy of a 151,936 × 1,024 gradient (155M values)
 *  is past what a JS array may hold. */
function firstValues(values: ArrayLike<number>, n: number): ArrayLike<number> {
  if (values instanceof Float32Array || values instanceof Float64Array) return values.subarray(0, n);
  return Array.prototype.slice.call(values, 0, n);
}
