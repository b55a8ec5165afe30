// The device's memory behind rollout.gpu_memory_utilization: looked up by adapter name (a size the name states, then
// the table), a share of system memory for unified memory, system memory for a software adapter, the
// WEBGPU_DEVICE_MEMORY override over all of them, and a stated guess that names the override otherwise.
import { describe, expect, it } from 'vitest';
import { deviceMemorySize, UNKNOWN_DEVICE_MEMORY_BYTES } from '../../engine/device-memory.ts';
import { readKnobs } from '../../engine/knobs.ts';

const GIB = 2 ** 30;
const gpu = (description: string, systemMemoryBytes: number | null = null) =>
  deviceMemorySize({ description, software: false }, null, systemMemoryBytes);

describe('the device memory', () => {
  it("takes the size an adapter name states, else the table's for its name (specific names first)", () => {
    expect(gpu('nvidia hopper NVIDIA H100 80GB HBM3')).toEqual({
      bytes: 80 * GIB,
      source: 'adapter name',
      label: 'device memory of nvidia hopper NVIDIA H100 80GB HBM3: 80 GiB (adapter name)',
    });
    expect(gpu('nvidia ampere NVIDIA A100-SXM4-40GB').bytes).toBe(40 * GIB);
    expect(gpu('nvidia volta Tesla V100-SXM2-32GB').bytes).toBe(32 * GIB);
    const table: [string, number][] = [
      ['nvidia hopper NVIDIA H100 NVL', 94],
      ['nvidia hopper NVIDIA H100 PCIe', 80],
      ['nvidia hopper NVIDIA H200', 141],
      ['nvidia ada NVIDIA L40S', 48],
      ['nvidia ada NVIDIA GeForce RTX 4090', 24],
      ['nvidia ada NVIDIA GeForce RTX 4080 SUPER', 16],
      ['nvidia ampere NVIDIA GeForce RTX 3090', 24],
      ['nvidia ampere NVIDIA A10G', 24],
      ['nvidia turing Tesla T4', 16],
      ['amd cdna-3 AMD Instinct MI300X', 192],
      ['amd cdna-2 AMD Instinct MI250X', 128],
      ['amd rdna-3 AMD Radeon RX 7900 XTX', 24],
      ['amd rdna-3 AMD Radeon RX 7900 XT', 20],
      ['intel xe-hpg Intel(R) Arc(TM) A770 Graphics', 16],
    ];
    for (const [name, gib] of table)
      expect(gpu(name), name).toMatchObject({
        bytes: gib * GIB,
        source: 'table',
        label: `device memory of ${name}: ${gib} GiB (table)`,
      });
  });

  it('gives unified memory its share of system memory, and a software adapter the system memory', () => {
    expect(gpu('apple metal-3 Apple M2 Max', 64 * GIB)).toEqual({
      bytes: 48 * GIB,
      source: 'unified memory',
      label: 'unified memory of apple metal-3 Apple M2 Max: 48 GiB (75% of system RAM 64 GiB)',
    });
    expect(deviceMemorySize({ description: 'mesa llvmpipe', software: true }, null, 24 * GIB)).toEqual({
      bytes: 24 * GIB,
      source: 'software adapter',
      label: 'system RAM 24 GiB (software adapter mesa llvmpipe)',
    });
  });

  it('states its guess for a GPU it does not know (or whose memory it cannot see) and names the override', () => {
    for (const size of [
      gpu('acme gpu-9000'),
      gpu('apple metal-3 Apple M3', null),
      deviceMemorySize({ description: 'mesa llvmpipe', software: true }, null, null),
    ]) {
      expect(size.bytes).toBe(UNKNOWN_DEVICE_MEMORY_BYTES);
      expect(size.source).toBe('unknown');
      expect(size.label).toMatch(
        /^4 GiB guessed for .*: set WEBGPU_DEVICE_MEMORY to its memory, e\.g\. WEBGPU_DEVICE_MEMORY=24GiB$/,
      );
    }
  });

  it('takes WEBGPU_DEVICE_MEMORY over everything, in bytes or with a unit, and refuses what is not a size', () => {
    expect(readKnobs({ WEBGPU_DEVICE_MEMORY: '80e9' }).deviceMemoryBytes).toBe(80e9);
    expect(readKnobs({ WEBGPU_DEVICE_MEMORY: '80GiB' }).deviceMemoryBytes).toBe(80 * GIB);
    expect(readKnobs({ WEBGPU_DEVICE_MEMORY: '24 GB' }).deviceMemoryBytes).toBe(24e9);
    expect(readKnobs({ WEBGPU_DEVICE_MEMORY: '512MiB' }).deviceMemoryBytes).toBe(512 * 2 ** 20);
    expect(readKnobs({}).deviceMemoryBytes).toBeNull();
    const override = readKnobs({ WEBGPU_DEVICE_MEMORY: '40GiB' }).deviceMemoryBytes;
    expect(
      deviceMemorySize({ description: 'nvidia hopper NVIDIA H100 80GB HBM3', software: false }, override, null),
    ).toEqual({
      bytes: 40 * GIB,
      source: 'override',
      label: 'WEBGPU_DEVICE_MEMORY: 40 GiB (override)',
    });
    expect(deviceMemorySize({ description: 'mesa llvmpipe', software: true }, override, 24 * GIB).bytes).toBe(40 * GIB);
    for (const bad of ['lots', '80TB', '80', '-1GiB']) {
      expect(() => readKnobs({ WEBGPU_DEVICE_MEMORY: bad }), bad).toThrow(
        /^WEBGPU_DEVICE_MEMORY: ".*" must be a memory size: bytes \(80e9\) or with a unit \(80GiB, 80GB, 512MiB\), at least 1 MiB$/,
      );
    }
  });
});
