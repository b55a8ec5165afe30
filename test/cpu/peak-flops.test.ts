import { describe, expect, it } from 'vitest';
import { peakFp32Flops, SOFTWARE_PEAK_FLOPS } from '../../engine/peak-flops.ts';
import { readKnobs } from '../../engine/knobs.ts';

const gpu = (description: string) => ({ description, softwareAdapter: false });

describe('the peak FLOP/s behind MFU', () => {
  it('looks the adapter up by name, specific names first', () => {
    expect(peakFp32Flops(gpu('nvidia hopper NVIDIA H100 80GB HBM3'), null)).toBe(66.9e12);
    expect(peakFp32Flops(gpu('nvidia hopper NVIDIA H100 PCIe'), null)).toBe(51.2e12);
    expect(peakFp32Flops(gpu('nvidia ampere NVIDIA A100-SXM4-40GB'), null)).toBe(19.5e12);
    expect(peakFp32Flops(gpu('nvidia ada NVIDIA L40S'), null)).toBe(91.6e12);
  });

  it(
    'gives a CPU implementation the measured lavapipe rate and an unknown GPU none (no MFU rather than a wrong ' +
      'one)',
    () => {
      expect(peakFp32Flops({ description: 'mesa llvmpipe', softwareAdapter: true }, null)).toBe(SOFTWARE_PEAK_FLOPS);
      expect(peakFp32Flops(gpu('amd rdna-3 Radeon Pro W7900'), null)).toBeNull();
    },
  );

  it('takes WEBGPU_PEAK_FLOPS over the table, and refuses a value that is not a positive number', () => {
    const knobs = readKnobs({ WEBGPU_PEAK_FLOPS: '61.3e12' });
    expect(peakFp32Flops(gpu('amd rdna-3 Radeon Pro W7900'), knobs.peakFlops)).toBe(61.3e12);
    expect(peakFp32Flops({ description: 'mesa llvmpipe', softwareAdapter: true }, knobs.peakFlops)).toBe(61.3e12);
    expect(() => readKnobs({ WEBGPU_PEAK_FLOPS: 'fast' })).toThrow(
      /WEBGPU_PEAK_FLOPS: "fast" must be a positive number/,
    );
  });
});
