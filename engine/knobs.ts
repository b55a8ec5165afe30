// Every environment switch of the engine, typed, in one place. Browser-safe: without `process`
// (a browser tab) every knob takes its default.
import { parseMemorySize } from './device-memory.ts';

type Env = Record<string, string | undefined>;

function environment(): Env {
  const maybeProcess = (globalThis as { process?: { env?: Env } }).process;
  return maybeProcess?.env ?? {};
}

function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** WEBGPU_MAX_BINDING_BYTES, WEBGPU_MAX_BUFFER_BYTES: a byte limit the engine keeps to below the device's. */
function readMaxBytes(key: string, value: string | undefined): number | null {
  if (value === undefined || value === '') return null;
  const bytes = Number(value);
  if (!Number.isInteger(bytes) || bytes < 4096 || bytes % 256 !== 0) {
    throw new Error(`${key}: "${value}" must be a whole number of bytes, a multiple of 256 and at least 4096`);
  }
  return bytes;
}

/** The classes of device the kernels' variants are written for (engine/device.ts). */
export const DEVICE_CLASSES = ['gpu', 'cpu'] as const;
export type DeviceClass = (typeof DEVICE_CLASSES)[number];

function readDeviceClass(value: string | undefined): DeviceClass | null {
  if (value === undefined || value === '') return null;
  if (!(DEVICE_CLASSES as readonly string[]).includes(value)) {
    throw new Error(
      `WEBGPU_DEVICE_CLASS: "${value}" must be ${DEVICE_CLASSES.join(' or ')} (or unset: the adapter's own class)`,
    );
  }
  return value as DeviceClass;
}

/** Which limits the device is asked for (engine/device.ts). */
export const LIMITS_CHOICES = ['default'] as const;
export type LimitsChoice = 'adapter' | (typeof LIMITS_CHOICES)[number];

function readLimits(value: string | undefined): LimitsChoice {
  if (value === undefined || value === '') return 'adapter';
  if (!(LIMITS_CHOICES as readonly string[]).includes(value)) {
    throw new Error(`WEBGPU_LIMITS: "${value}" must be default (or unset: the adapter's own limits)`);
  }
  return value as LimitsChoice;
}

function readPeakFlops(value: string | undefined): number | null {
  if (value === undefined || value === '') return null;
  const flops = Number(value);
  if (!Number.isFinite(flops) || flops <= 0)
    throw new Error(`WEBGPU_PEAK_FLOPS: "${value}" must be a positive number of FLOP/s (e.g. 66.9e12)`);
  return flops;
}

/** TRAIN_DEBUG alone: what a stopped run's error report reads even when another knob is the error. */
export function readTrainDebug(env: Env = environment()): boolean {
  return env.TRAIN_DEBUG === '1';
}

export interface EngineKnobs {
  /** WEBGPU_DEBUG: 1 = log adapter and limits, 2 = also every dispatch. */
  debug: number;
  /** WEBGPU_PROFILE=1: time every kernel with timestamp queries (when the device has them). */
  profile: boolean;
  /** WEBGPU_DISABLE_FEATURES=shader-f16,subgroups: pretend the device lacks these (to test fallbacks). */
  disabledFeatures: string[];
  /** WEBGPU_KERNEL_VARIANTS=matmul:naive,attention:v1: force a kernel variant instead of the automatic choice. */
  kernelVariants: Record<string, string>;
  /** WEBGPU_MAX_BINDING_BYTES=65536: pretend the device binds at most this many bytes per storage binding, so the
   *  paths that split large tensors run (and are tested) on shapes that would fit whole. null: the device's limit. */
  maxBindingBytes: number | null;
  /** WEBGPU_MAX_BUFFER_BYTES=32768: pretend the device's largest buffer (maxBufferSize) is this many bytes, so a
   *  tensor above it is split across buffers (engine/arena.ts) on shapes that would fit one; every other tensor
   *  must fit it too. null: the device's limit. */
  maxBufferBytes: number | null;
  /** WEBGPU_DEVICE_CLASS=gpu|cpu: choose every kernel variant as on a discrete GPU or on a CPU device, whatever
   *  the adapter is (so lavapipe runs the GPU variants in CI). null: the adapter's own class. */
  deviceClass: DeviceClass | null;
  /** WEBGPU_LIMITS=default: ask the device for WebGPU's default limits only (8 storage buffers per stage, 256 MiB
   *  buffers, 16 KiB workgroup memory, ...), whatever the adapter offers, so every kernel is run within what any
   *  WebGPU implementation gives. 'adapter' (unset): the adapter's own limits. */
  limits: LimitsChoice;
  /** WEBGPU_PEAK_FLOPS=66.9e12: the device's peak FP32 FLOP/s for MFU, instead of engine/peak-flops.ts's table. */
  peakFlops: number | null;
  /** WEBGPU_DEVICE_MEMORY=80GiB: the device's memory, instead of engine/device-memory.ts's table (the base of
   *  rollout.gpu_memory_utilization and of the run's memory plan). null: looked up. */
  deviceMemoryBytes: number | null;
  /** TRAIN_DEBUG=1: an error that stops a run prints its stack trace under its one-line message. */
  trainDebug: boolean;
  /** WEBGPU_PIPELINE_LOG=<file>: append every pipeline created to <file> (JSON lines) for `tools/bench.js compile`. */
  pipelineLog: string | null;
}

export function readKnobs(env: Env = environment()): EngineKnobs {
  const kernelVariants: Record<string, string> = {};
  for (const entry of list(env.WEBGPU_KERNEL_VARIANTS)) {
    const [kernel, variant] = entry.split(':');
    if (!kernel || !variant) {
      throw new Error(`WEBGPU_KERNEL_VARIANTS: entry "${entry}" must look like kernel:variant (e.g. matmul:naive)`);
    }
    kernelVariants[kernel] = variant;
  }
  return {
    debug: Number(env.WEBGPU_DEBUG ?? 0) || 0,
    profile: env.WEBGPU_PROFILE === '1',
    disabledFeatures: list(env.WEBGPU_DISABLE_FEATURES),
    kernelVariants,
    maxBindingBytes: readMaxBytes('WEBGPU_MAX_BINDING_BYTES', env.WEBGPU_MAX_BINDING_BYTES),
    maxBufferBytes: readMaxBytes('WEBGPU_MAX_BUFFER_BYTES', env.WEBGPU_MAX_BUFFER_BYTES),
    deviceClass: readDeviceClass(env.WEBGPU_DEVICE_CLASS),
    limits: readLimits(env.WEBGPU_LIMITS),
    peakFlops: readPeakFlops(env.WEBGPU_PEAK_FLOPS),
    deviceMemoryBytes: env.WEBGPU_DEVICE_MEMORY
      ? parseMemorySize(env.WEBGPU_DEVICE_MEMORY, 'WEBGPU_DEVICE_MEMORY')
      : null,
    trainDebug: readTrainDebug(env),
    pipelineLog: env.WEBGPU_PIPELINE_LOG || null,
  };
}
