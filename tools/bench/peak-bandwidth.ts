// The device's peak memory bandwidth, the denominator of a memory-bound kernel's share of the card (the GPU
// report's GB/s rows), as engine/peak-flops.ts is of a matmul's. WebGPU does not report it: a table of vendors'
// figures by adapter name, first match wins (specific names first); an adapter it does not know has none, and its
// rows show no share rather than a wrong one.

const PEAK_GB_PER_S: readonly [RegExp, number][] = [
  [/H200/i, 4800],
  [/H100 NVL/i, 3900],
  [/H100.*PCIe/i, 2000],
  [/H100/i, 3350],
  [/A100.*80GB/i, 2039],
  [/A100/i, 1555],
  [/L40S|L40\b/i, 864],
  [/\bL4\b/i, 300],
  [/A10G|\bA10\b/i, 600],
  [/RTX 4090/i, 1008],
  [/RTX 4080/i, 717],
  [/RTX 3090/i, 936],
  [/V100/i, 900],
  [/\bT4\b/i, 320],
  [/MI300X/i, 5300],
  [/MI250/i, 3277],
  [/RX 7900 XTX/i, 960],
];

/** Bytes per second, or null for an adapter the table does not know (software adapters included). */
export function peakBandwidth(description: string): number | null {
  const gbps = PEAK_GB_PER_S.find(([pattern]) => pattern.test(description))?.[1];
  return gbps === undefined ? null : gbps * 1e9;
}
