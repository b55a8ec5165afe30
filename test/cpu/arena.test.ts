// Arena planning: small tensors pack into buffers of at most one binding; a tensor above the binding limit gets
// a buffer of its own, cut into bindable, aligned segments; one above the largest buffer is split on whole rows
// across buffers of its own (its half-precision copy at the same rows); a single row above it is an error.
import { describe, it, expect } from 'vitest';
import { planArena } from '../../engine/arena.ts';
import { rowsPerWindow } from '../../engine/tensor.ts';
import { WEBGPU_DEFAULT_LIMITS } from '../../engine/device.ts';

describe('planArena', () => {
  it('packs small tensors and gives an oversized one its own buffer of bindable segments', () => {
    // Binding 4096 B = 1024 floats, alignment 256 B = 64 floats.
    const layout = planArena(
      [
        { name: 'a', shape: [100] },
        { name: 'embedding', shape: [50, 60] },
        { name: 'b', shape: [900] },
        { name: 'c', shape: [10] },
      ],
      4096,
      1 << 20,
      256,
    );
    expect(layout.slots.map((s) => [s.name, s.parts[0].buffer, s.parts[0].offset])).toEqual([
      ['a', 0, 0],
      ['embedding', 1, 0],
      ['b', 2, 0],
      ['c', 2, 960],
    ]);
    expect(layout.bufferSizes).toEqual([128, 3008, 1024]);
    expect(layout.segments).toEqual([
      { buffer: 0, offset: 0, size: 128 },
      { buffer: 1, offset: 0, size: 1024 },
      { buffer: 1, offset: 1024, size: 1024 },
      { buffer: 1, offset: 2048, size: 960 },
      { buffer: 2, offset: 0, size: 1024 },
    ]);
    expect(layout.segments.map((s) => s.size)).toEqual([128, 1024, 1024, 960, 1024]);
  });

  it('gives a bf16/f16 entry half the words of a float32 one (odd counts round up), aligned like the rest', () => {
    const layout = planArena(
      [
        { name: 'norm', shape: [3] },
        { name: 'w', shape: [5, 7], dtype: 'bf16' },
        { name: 'big', shape: [2048, 4], dtype: 'f16' },
      ],
      4096,
      1 << 20,
      256,
    );
    expect(layout.slots.map((s) => [s.name, s.dtype, s.parts[0].buffer, s.parts[0].offset])).toEqual([
      ['norm', 'f32', 0, 0],
      ['w', 'bf16', 0, 64],
      ['big', 'f16', 1, 0],
    ]);
    // w: 35 halves in 18 words; big: 8192 halves = 16 KiB, its own buffer of four 4 KiB segments.
    expect(layout.bufferSizes).toEqual([128, 4096]);
    expect(layout.segments.filter((s) => s.buffer === 1)).toHaveLength(4);
  });

  it('splits a tensor above the largest buffer into parts of whole rows, each its own buffer of segments', () => {
    // Buffer 16 KiB = 4096 floats = 40 rows of 100 floats (whole words of halves: an even count per part).
    const entries = [
      { name: 'a', shape: [100] },
      { name: 'embedding', shape: [100, 100] },
      { name: 'b', shape: [10] },
    ];
    const layout = planArena(entries, 4096, 16384, 256);
    expect(layout.slots.map((s) => [s.name, s.parts])).toEqual([
      ['a', [{ buffer: 0, offset: 0, firstRow: 0, rows: 100 }]],
      [
        'embedding',
        [
          { buffer: 1, offset: 0, firstRow: 0, rows: 40 },
          { buffer: 2, offset: 0, firstRow: 40, rows: 40 },
          { buffer: 3, offset: 0, firstRow: 80, rows: 20 },
        ],
      ],
      ['b', [{ buffer: 0, offset: 128, firstRow: 0, rows: 10 }]],
    ]);
    expect(layout.bufferSizes).toEqual([192, 4032, 4032, 2048]);
    // Each part is cut into bindings of 1024 words: 4 + 4 + 2 segments.
    expect(layout.segments.filter((s) => s.buffer > 0).map((s) => s.size)).toEqual([
      1024, 1024, 1024, 960, 1024, 1024, 1024, 960, 1024, 1024,
    ]);
    // A bf16 copy splits at the float32 form's rows (its parts are half the words), so copies walk matching parts.
    const half = planArena(
      entries.map((e) => ({ ...e, dtype: 'bf16' as const })),
      4096,
      16384,
      256,
    );
    expect(half.slots[1].parts.map((p) => [p.firstRow, p.rows])).toEqual([
      [0, 40],
      [40, 40],
      [80, 20],
    ]);
    expect(half.bufferSizes.slice(1)).toEqual([2048, 2048, 1024]);
  });

  it("Qwen3-0.6B's 622 MB embedding under WebGPU's default limits: 3 buffers of at most 256 MiB", () => {
    const { maxStorageBufferBindingSize, maxBufferSize, minStorageBufferOffsetAlignment } = WEBGPU_DEFAULT_LIMITS;
    const entries = [
      { name: 'model.embed_tokens.weight', shape: [151936, 1024] },
      { name: 'model.layers.0.mlp.gate_up_proj.weight', shape: [6144, 1024] },
    ];
    for (const dtype of ['f32', 'bf16'] as const) {
      const layout = planArena(
        entries.map((e) => ({ ...e, dtype })),
        maxStorageBufferBindingSize,
        maxBufferSize,
        minStorageBufferOffsetAlignment,
      );
      // 4 KiB float32 rows: 65,536 to a 256 MiB buffer, whatever the dtype (a bf16 part is half full).
      expect(layout.slots[0].parts.map((p) => p.rows)).toEqual([65536, 65536, 20864]);
      expect(Math.max(...layout.bufferSizes) * 4).toBeLessThanOrEqual(maxBufferSize);
      expect(layout.slots[1].parts).toHaveLength(1);
    }
  });

  it('names a tensor whose single row is larger than the largest buffer', () => {
    expect(() => planArena([{ name: 'huge', shape: [2, 5000] }], 4096, 16384, 256)).toThrow(
      "arena: tensor huge [2, 5000] has rows of 20000 bytes (as float32), above the device's largest buffer of 16384 " +
        'bytes (maxBufferSize)',
    );
  });
});

describe('rowsPerWindow', () => {
  it('keeps every window start aligned and within the limit', () => {
    expect(rowsPerWindow(32, 16384, 256)).toBe(128); // 128-byte rows: pairs of rows per 256 bytes
    expect(rowsPerWindow(3, 4096, 256)).toBe(320); // 12-byte rows: 64 rows per 768 bytes, 4096 / 12 = 341 → 320
    expect(rowsPerWindow(1024, 134217728, 256)).toBe(32768);
    expect(() => rowsPerWindow(2048, 4096, 256)).toThrow(/rows of 8192 bytes cannot be bound/);
  });
});
