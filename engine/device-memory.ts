// The device's memory size, the base of the rollout's budget (verl's rollout.gpu_memory_utilization) and of the
// run's memory plan. WebGPU reports no memory size, so it comes, first match wins, from: WEBGPU_DEVICE_MEMORY (the
// user's override); a size the adapter's name states ("NVIDIA A100-SXM4-80GB"); a table of common GPUs by name; a
// share of system memory where the GPU has none of its own (Apple's unified memory, Intel's integrated GPUs) or the
// adapter is a CPU implementation (lavapipe, SwiftShader allocate from system memory); and else a stated guess.
// System memory needs a Node API, so the caller passes it in (null in a browser tab).
// Browser-safe.

const GIB = 2 ** 30;

/** Where the size came from, as the memory plan labels it. */
export type DeviceMemorySource =
  | 'override'
  | 'adapter name'
  | 'table'
  | 'unified memory'
  | 'software adapter'
  | 'unknown';

export interface DeviceMemorySize {
  bytes: number;
  source: DeviceMemorySource;
  /** One line for the memory plan: how many bytes, of what, from where (and, when guessed, what to set). */
  label: string;
}

/** GiB of memory by a pattern of the adapter's name; specific names before the names they contain. Sizes as
 *  the vendors sell them (an "80GB" H100 is 80 GiB, of which the driver keeps a little). */
const GPU_MEMORY_GIB: readonly [RegExp, number][] = [
  // NVIDIA data centre
  [/GH200/i, 96],
  [/H200/i, 141],
  [/H100 NVL/i, 94],
  [/H100/i, 80],
  [/\bH20\b/i, 96],
  [/B200/i, 180],
  [/A100/i, 40],
  [/A800/i, 80],
  [/\bA40\b/i, 48],
  [/\bA30\b/i, 24],
  [/A10G/i, 24],
  [/\bA10\b/i, 24],
  [/L40S/i, 48],
  [/\bL40\b/i, 48],
  [/\bL4\b/i, 24],
  [/V100/i, 16],
  [/P100/i, 16],
  [/\bT4\b/i, 16],
  // NVIDIA workstation and desktop (laptop parts have less memory under the same number)
  [/RTX 6000 Ada/i, 48],
  [/RTX A6000/i, 48],
  [/RTX A5000/i, 24],
  [/RTX A4000/i, 16],
  [/TITAN RTX/i, 24],
  [/RTX 5090/i, 32],
  [/RTX 5080/i, 16],
  [/RTX 4090 Laptop/i, 16],
  [/RTX 4090/i, 24],
  [/RTX 4080/i, 16],
  [/RTX 4070 Ti SUPER/i, 16],
  [/RTX 4070/i, 12],
  [/RTX 4060 Ti/i, 8],
  [/RTX 4060/i, 8],
  [/RTX 3090/i, 24],
  [/RTX 3080 Ti/i, 12],
  [/RTX 3080/i, 10],
  [/RTX 3070/i, 8],
  [/RTX 3060/i, 12],
  [/RTX 2080 Ti/i, 11],
  // AMD
  [/MI325X/i, 256],
  [/MI300X/i, 192],
  [/MI300A/i, 128],
  [/MI250/i, 128],
  [/MI210/i, 64],
  [/MI100/i, 32],
  [/Radeon PRO W7900/i, 48],
  [/RX 7900 XTX/i, 24],
  [/RX 7900 XT\b/i, 20],
  [/RX 7900 GRE/i, 16],
  [/RX 7800 XT/i, 16],
  [/RX 6950 XT|RX 6900 XT|RX 6800/i, 16],
  // Intel discrete
  [/Data Center GPU Max 1550/i, 128],
  [/Data Center GPU Max 1100/i, 48],
  [/Arc.*A770/i, 16],
  [/Arc.*A750/i, 8],
  [/Arc.*B580/i, 12],
];

/** GPUs without memory of their own, and the share of system memory they may take: Metal's
 *  recommendedMaxWorkingSetSize is about 3/4 of an Apple silicon Mac's memory; Windows and Linux let an Intel
 *  integrated GPU take up to half. */
const UNIFIED_MEMORY_SHARE: readonly [RegExp, number][] = [
  [/Apple M\d/i, 0.75],
  [/Intel.*(UHD|Iris)/i, 0.5],
];

/** The guess for a GPU the table does not know, stated as such: a small size errs towards fewer sequences decoded
 *  at once (slower), never towards a run that fails for want of memory. */
export const UNKNOWN_DEVICE_MEMORY_BYTES = 4 * GIB;

/** "80 GiB", "1.5 GiB". */
export function formatGib(bytes: number): string {
  const gib = bytes / GIB;
  return `${Number.isInteger(gib) ? gib : gib.toFixed(1)} GiB`;
}

/** The memory of the adapter described as `adapter.description` (`software`: a CPU implementation). */
export function deviceMemorySize(
  adapter: { description: string; software: boolean },
  overrideBytes: number | null,
  systemMemoryBytes: number | null,
): DeviceMemorySize {
  const name = adapter.description;
  if (overrideBytes !== null)
    return {
      bytes: overrideBytes,
      source: 'override',
      label: `WEBGPU_DEVICE_MEMORY: ${formatGib(overrideBytes)} (override)`,
    };
  if (adapter.software) {
    return systemMemoryBytes !== null
      ? {
          bytes: systemMemoryBytes,
          source: 'software adapter',
          label: `system RAM ${formatGib(systemMemoryBytes)} (software adapter ${name})`,
        }
      : unknown(name, 'a software adapter allocates from system memory, and this runtime does not report it');
  }
  const stated = /(\d+)\s*GB\b/i.exec(name);
  if (stated) {
    const bytes = Number(stated[1]) * GIB;
    return { bytes, source: 'adapter name', label: `device memory of ${name}: ${formatGib(bytes)} (adapter name)` };
  }
  const listed = GPU_MEMORY_GIB.find(([pattern]) => pattern.test(name));
  if (listed)
    return {
      bytes: listed[1] * GIB,
      source: 'table',
      label: `device memory of ${name}: ${formatGib(listed[1] * GIB)} (table)`,
    };
  const unified = UNIFIED_MEMORY_SHARE.find(([pattern]) => pattern.test(name));
  if (unified) {
    if (systemMemoryBytes === null)
      return unknown(name, 'its memory is a share of system memory, and this runtime does not report it');
    const bytes = Math.floor(unified[1] * systemMemoryBytes);
    return {
      bytes,
      source: 'unified memory',
      label:
        `unified memory of ${name}: ${formatGib(bytes)} (${unified[1] * 100}% of system RAM ` +
        `${formatGib(systemMemoryBytes)})`,
    };
  }
  return unknown(name, 'not in the table of engine/device-memory.ts');
}

function unknown(name: string, why: string): DeviceMemorySize {
  return {
    bytes: UNKNOWN_DEVICE_MEMORY_BYTES,
    source: 'unknown',
    label:
      `${formatGib(UNKNOWN_DEVICE_MEMORY_BYTES)} guessed for ${name} (${why}): set WEBGPU_DEVICE_MEMORY to its ` +
      `memory, e.g. WEBGPU_DEVICE_MEMORY=24GiB`,
  };
}

/** WEBGPU_DEVICE_MEMORY's value: bytes ("80e9", "85899345920") or with a unit ("80GiB", "80GB", "512MiB"). */
export function parseMemorySize(value: string, what: string): number {
  const match = /^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*(GiB|GB|MiB|MB)?\s*$/i.exec(value);
  const units: Record<string, number> = { gib: GIB, gb: 1e9, mib: 2 ** 20, mb: 1e6 };
  const bytes = match ? Number(match[1]) * (match[2] ? units[match[2].toLowerCase()] : 1) : NaN;
  if (!Number.isFinite(bytes) || bytes < 2 ** 20) {
    throw new Error(
      `${what}: "${value}" must be a memory size: bytes (80e9) or with a unit (80GiB, 80GB, 512MiB), at least 1 MiB`,
    );
  }
  return Math.floor(bytes);
}
