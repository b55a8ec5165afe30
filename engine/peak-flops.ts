// The device's peak FP32 throughput, the denominator of MFU (perf/mfu). WebGPU does not report it, so it comes from
// a table of dense FP32 (non-tensor-core) peaks by adapter name, as verl's flops counter looks up its GPU by name;
// a CPU implementation gets this project's measured lavapipe matmul rate; WEBGPU_PEAK_FLOPS overrides both. An
// adapter the table does not know has no peak, and its runs log no MFU rather than a wrong one.
import type { DeviceCapabilities } from './device.ts';

/** Dense FP32 FLOP/s by a pattern of the adapter's description; the first match wins (specific names first). */
const FP32_PEAKS: readonly [RegExp, number][] = [
  [/H100.*PCIe/i, 51.2e12],
  [/H100|H200|GH200/i, 66.9e12],
  [/A100/i, 19.5e12],
  [/L40S/i, 91.6e12],
  [/L40\b/i, 90.5e12],
  [/\bL4\b/i, 30.3e12],
  [/A10G/i, 31.2e12],
  [/\bA10\b/i, 31.2e12],
  [/RTX 4090/i, 82.6e12],
  [/RTX 3090/i, 35.6e12],
  [/V100/i, 15.7e12],
  [/\bT4\b/i, 8.1e12],
];

/** lavapipe's tuned-matmul rate on this project's 2-core machines (the default job's MFU has always used it). */
export const SOFTWARE_PEAK_FLOPS = 19e9;

export function peakFp32Flops(
  caps: Pick<DeviceCapabilities, 'description' | 'softwareAdapter'>,
  override: number | null,
): number | null {
  if (override !== null) return override;
  if (caps.softwareAdapter) return SOFTWARE_PEAK_FLOPS;
  return FP32_PEAKS.find(([pattern]) => pattern.test(caps.description))?.[1] ?? null;
}
