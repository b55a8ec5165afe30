// The only module that talks to the WebGPU adapter: finds one (Node via the `webgpu` package, a browser via
// navigator.gpu), asks for the adapter's own limits (or WebGPU's defaults, WEBGPU_LIMITS=default) and optional
// features, and records what it got.
import { readKnobs, type DeviceClass, type EngineKnobs } from './knobs.ts';

const OPTIONAL_FEATURES = ['shader-f16', 'subgroups', 'timestamp-query'] as const;

/**
 * WebGPU's default limits (the spec's table): what every implementation gives a device that asks for nothing more,
 * phones and integrated GPUs included. Under WEBGPU_LIMITS=default the engine runs within these.
 */
export const WEBGPU_DEFAULT_LIMITS = {
  maxBufferSize: 268435456,
  maxStorageBufferBindingSize: 134217728,
  maxStorageBuffersPerShaderStage: 8,
  maxComputeWorkgroupStorageSize: 16384,
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupSizeX: 256,
  maxComputeWorkgroupSizeY: 256,
  maxComputeWorkgroupsPerDimension: 65535,
  minStorageBufferOffsetAlignment: 256,
  minUniformBufferOffsetAlignment: 256,
} as const;

type LimitName = keyof typeof WEBGPU_DEFAULT_LIMITS;
// The two alignments are minimums: a larger value is the stricter one.
const ALIGNMENTS: readonly LimitName[] = ['minStorageBufferOffsetAlignment', 'minUniformBufferOffsetAlignment'];

export interface DeviceCapabilities {
  description: string;
  /** WEBGPU_LIMITS=default: every limit below is at most WebGPU's default (the alignments at least). */
  defaultLimits: boolean;
  /**
   * The class every kernel variant is chosen for: 'cpu' prefers fewer loads and fewer dispatches (a CPU runs a
   * workgroup as a loop), 'gpu' prefers many small workgroups and tiles in workgroup memory. The adapter's own class
   * unless WEBGPU_DEVICE_CLASS names one, so the GPU variants run (and are tested) on lavapipe too.
   */
  deviceClass: DeviceClass;
  /** The adapter is a CPU implementation (lavapipe, SwiftShader), whatever deviceClass says: what depends on the
   *  real machine (its peak FLOP/s, its memory, how the host waits for it, CPU-time timing) reads this. */
  softwareAdapter: boolean;
  shaderF16: boolean;
  subgroups: boolean;
  /** The adapter's smallest subgroup size (0: not reported). */
  subgroupMinSize: number;
  timestampQuery: boolean;
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
  maxStorageBuffersPerShaderStage: number;
  maxComputeWorkgroupStorageSize: number;
  maxComputeInvocationsPerWorkgroup: number;
  maxComputeWorkgroupsPerDimension: number;
  minStorageBufferOffsetAlignment: number;
  minUniformBufferOffsetAlignment: number;
}

export interface Gpu {
  device: GPUDevice;
  caps: DeviceCapabilities;
  knobs: EngineKnobs;
  /** Set once the device is lost; every later submission throws this instead of hanging. */
  lostReason: string | null;
  destroy(): void;
}

// Dawn's node binding segfaults when the object returned by create() is garbage-collected while a device
// lives, so it is pinned here for the life of the process.
let nodeGpuInstance: GPU | null = null;

/** The process's WebGPU entry point (exported for peer benchmarks that must share the engine's Dawn instance). */
export async function findGpu(): Promise<GPU> {
  const browserGpu = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
  if (browserGpu) return browserGpu;
  if (nodeGpuInstance) return nodeGpuInstance;
  const nodeWebgpu = 'webgpu';
  const { create, globals } = (await import(/* @vite-ignore */ nodeWebgpu)) as {
    create: (flags: string[]) => GPU;
    globals: Record<string, unknown>;
  };
  Object.assign(globalThis, globals);
  nodeGpuInstance = create([]);
  return nodeGpuInstance;
}

/**
 * Lines Dawn writes to the process's stderr (natively, past Node's streams) that the engine knows to be harmless:
 * lavapipe and some drivers report ~1,000,000 dynamic buffers per pipeline layout, Dawn caps them at 16 for its offset
 * allocation while it enumerates adapters, and says so on every start. The engine's pipeline layouts hold one
 * dynamic-offset buffer (the uniforms at binding 0, engine/engine.ts), so the cap of 16 changes nothing here. Matched
 * whole, numbers included, so any other device line still shows (engine/native-stderr-node.ts applies them).
 */
export const HARMLESS_DAWN_STDERR_LINES: readonly RegExp[] = [
  /^Warning: maxDynamic(Uniform|Storage)BuffersPerPipelineLayout artificially reduced from \d+ to \d+ to fit dynamic offset allocation limit\.$/,
];

const NO_ADAPTER_HELP =
  'No WebGPU adapter found. On a machine without a GPU run `bash tools/setup.sh`: it installs Mesa >= 24 ' +
  "lavapipe (software Vulkan). Debian 12's own Mesa 22.3 is rejected by Dawn.";

export async function createGpu(knobs: EngineKnobs = readKnobs()): Promise<Gpu> {
  const gpu = await findGpu();
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new Error(NO_ADAPTER_HELP);

  const wanted = OPTIONAL_FEATURES.filter((f) => adapter.features.has(f) && !knobs.disabledFeatures.includes(f));
  const defaultLimits = knobs.limits === 'default';
  // Asking for no limit gives the defaults.
  const requiredLimits: Record<string, number> = {};
  if (!defaultLimits) {
    for (const key of [
      'maxBufferSize',
      'maxStorageBufferBindingSize',
      'maxStorageBuffersPerShaderStage',
      'maxComputeWorkgroupStorageSize',
      'maxComputeInvocationsPerWorkgroup',
      'maxComputeWorkgroupSizeX',
      'maxComputeWorkgroupSizeY',
      'maxComputeWorkgroupsPerDimension',
    ] as const) {
      requiredLimits[key] = adapter.limits[key];
    }
  }
  const device = await adapter.requestDevice({ requiredFeatures: wanted as GPUFeatureName[], requiredLimits });

  const info = adapter.info;
  const description = [info.vendor, info.architecture, info.device, info.description]
    .filter((s) => s && s.length > 0)
    .join(' ')
    .replace(/\s+/g, ' ');
  const softwareAdapter = /llvmpipe|lavapipe|swiftshader|software/i.test(description) || info.architecture === 'cpu';
  // An implementation may hand out more than was asked for; under default limits the engine still keeps to them.
  const limit = (key: LimitName): number => {
    const given = device.limits[key];
    if (!defaultLimits) return given;
    return ALIGNMENTS.includes(key)
      ? Math.max(given, WEBGPU_DEFAULT_LIMITS[key])
      : Math.min(given, WEBGPU_DEFAULT_LIMITS[key]);
  };
  const caps: DeviceCapabilities = {
    description,
    defaultLimits,
    deviceClass: knobs.deviceClass ?? (softwareAdapter ? 'cpu' : 'gpu'),
    softwareAdapter,
    shaderF16: device.features.has('shader-f16'),
    subgroups: device.features.has('subgroups'),
    subgroupMinSize: info.subgroupMinSize ?? 0,
    timestampQuery: device.features.has('timestamp-query'),
    maxBufferSize: Math.min(limit('maxBufferSize'), knobs.maxBufferBytes ?? Infinity),
    maxStorageBufferBindingSize: Math.min(limit('maxStorageBufferBindingSize'), knobs.maxBindingBytes ?? Infinity),
    maxStorageBuffersPerShaderStage: limit('maxStorageBuffersPerShaderStage'),
    maxComputeWorkgroupStorageSize: limit('maxComputeWorkgroupStorageSize'),
    maxComputeInvocationsPerWorkgroup: limit('maxComputeInvocationsPerWorkgroup'),
    maxComputeWorkgroupsPerDimension: limit('maxComputeWorkgroupsPerDimension'),
    minStorageBufferOffsetAlignment: limit('minStorageBufferOffsetAlignment'),
    minUniformBufferOffsetAlignment: limit('minUniformBufferOffsetAlignment'),
  };

  const result: Gpu = {
    device,
    caps,
    knobs,
    lostReason: null,
    destroy: () => device.destroy(),
  };
  device.lost.then((lost) => {
    if (lost.reason !== 'destroyed') result.lostReason = `WebGPU device lost (${lost.reason}): ${lost.message}`;
  });
  device.addEventListener('uncapturederror', (event) => {
    const error = (event as GPUUncapturedErrorEvent).error;
    console.error(`WebGPU error: ${error.message}`);
  });
  if (knobs.debug >= 1) {
    console.error(
      `webgpu: ${describeDevice(caps, knobs)}; ` +
        `features ${wanted.join(',') || 'none'}; ` +
        `maxStorageBufferBindingSize ${caps.maxStorageBufferBindingSize}`,
    );
  }
  return result;
}

/**
 * The line a run prints about its device: `<adapter> (<class> kernels[, WEBGPU_DEVICE_CLASS][, WebGPU default
 * limits])`, so a pasted log says which variants ran and within which limits.
 */
export function describeDevice(caps: DeviceCapabilities, knobs: Pick<EngineKnobs, 'deviceClass'>): string {
  const notes = [`${caps.deviceClass} kernels`];
  if (knobs.deviceClass) notes.push('WEBGPU_DEVICE_CLASS');
  if (caps.defaultLimits) notes.push('WebGPU default limits');
  return `${caps.description} (${notes.join(', ')})`;
}
