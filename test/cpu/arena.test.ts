// Arena planning: small tensors pack into buffers of at most one binding; a tensor above the binding limit gets
// a buffer of its own, cut into bindable, aligned segments; one above the largest buffer is an error naming it.
import { describe, it, expect } from 'vitest';
import { planArena } from '../../engine/arena.ts';
import { rowsPerWindow } from '../../engine/tensor.ts';

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
    expect(layout.slots.map((s) => [s.name, s.buffer, s.offset])).toEqual([
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
    expect(layout.slots.map((s) => [s.name, s.dtype, s.buffer, s.offset])).toEqual([
      ['norm', 'f32', 0, 0],
      ['w', 'bf16', 0, 64],
      ['big', 'f16', 1, 0],
    ]);
    // w: 35 halves in 18 words; big: 8192 halves = 16 KiB, its own buffer of four 4 KiB segments.
    expect(layout.bufferSizes).toEqual([128, 4096]);
    expect(layout.segments.filter((s) => s.buffer === 1)).toHaveLength(4);
  });

  it('names a tensor larger than the largest buffer', () => {
    expect(() => planArena([{ name: 'huge', shape: [1000, 1000] }], 4096, 1 << 20, 256)).toThrow(
      "arena: tensor huge [1000, 1000] needs 4000000 bytes, above the device's largest buffer of 1048576 bytes " +
        '(maxBufferSize)',
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
