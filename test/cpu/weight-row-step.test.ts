// The rows per window matmul takes a layer weight in (kernels/matmul/matmul.ts weightRowStep) at real models' shapes
// under WebGPU's default 128 MiB binding and 256-byte offset alignment: every window fits the binding, starts
// aligned (NF4: on a whole block of 64), and holds a multiple of 4 rows; the float32, bf16, int8 and NF4 gate/up
// projections of Qwen3-4B/8B/14B and a 70B-class model each take two windows.
import { describe, it, expect } from 'vitest';
import { weightRowStep } from '../../kernels/matmul/matmul.ts';

const MIB = 2 ** 20;
const BINDING = 128 * MIB;
const ALIGN = 256;

/** [what, rows, row length, elements per 4-byte word, rows per window] */
const CASES: [string, number, number, number, number][] = [
  // 2 · 12,288 × 4,096 bf16 = 192 MiB: 8 KiB rows, 16,384 a window.
  ['Qwen3-8B gate_up_proj, bf16', 24576, 4096, 2, 16384],
  // 2 · 9,728 × 2,560 float32 = 190 MiB: 10 KiB rows, 13,107 fit, 13,104 a multiple of 4.
  ['Qwen3-4B gate_up_proj, float32', 19456, 2560, 1, 13104],
  // 2 · 17,408 × 5,120 int8 = 170 MiB: 5 KiB rows.
  ['Qwen3-14B gate_up_proj, int8', 34816, 5120, 4, 26212],
  // 2 · 28,672 × 8,192 NF4 = 224 MiB: 4 KiB rows.
  ['a 70B-class gate_up_proj, NF4', 57344, 8192, 8, 32768],
];

describe('weight windows at real shapes', () => {
  for (const [what, rows, rowLength, perWord, expected] of CASES) {
    it(`${what}: ${expected} rows a window, two windows, each within the binding and aligned`, () => {
      const step = weightRowStep(rowLength, perWord, BINDING, ALIGN);
      expect(step).toBe(expected);
      expect(Math.ceil(rows / step)).toBe(2);
      const rowBytes = (rowLength * 4) / perWord;
      expect(step * rowBytes).toBeLessThanOrEqual(BINDING);
      expect(step % 4).toBe(0);
      expect((step * rowBytes) % ALIGN).toBe(0);
      if (perWord === 8) expect((step * rowLength) % 64).toBe(0);
    });
  }

  it('odd row lengths: every window within the binding and starting aligned (NF4 on a block), or none fits', () => {
    for (const [rowLength, perWord] of [
      [36, 1],
      [36, 2],
      [36, 4],
      [36, 8],
      [130, 1],
      [1000, 8],
    ]) {
      for (const maxBytes of [4096, 8192, 65536]) {
        const step = weightRowStep(rowLength, perWord, maxBytes, ALIGN);
        const what = `row length ${rowLength}, ${perWord} per word, ${maxBytes} bytes`;
        if (step === 0) continue;
        const rowBytes = (rowLength * 4) / perWord;
        expect(step * rowBytes, what).toBeLessThanOrEqual(maxBytes);
        expect((step * rowBytes) % ALIGN, what).toBe(0);
        if (perWord === 8) expect((step * rowLength) % 64, what).toBe(0);
      }
    }
    // 130 NF4 codes a row (65 bytes): windows start every 256 rows, 16,640 bytes, above a 4 KiB binding.
    expect(weightRowStep(130, 8, 4096, ALIGN)).toBe(0);
  });
});
