// bitsandbytes' 8-bit dynamic map (functional.py create_dynamic_map at 95f9af30) as AdamW8bit uses it. No torch here
// to print the 256 values from, so: the structure the Python builds (per decade 10^(i-6), 2^i midpoints for the
// signed map and their negatives, 2^(i+1) for the unsigned one, then 0 and 1.0, sorted), and each value against
// the same formula evaluated in float64 — within one float32 rounding of the product and its factors (the map is
// torch's float32 linspace, midpoint and product; which ulp each lands on is what engine/dynamic-map.ts
// emulates).
import { describe, it, expect } from 'vitest';
import { createDynamicMap } from '../../engine/dynamic-map.ts';

/** The Python, with exact arithmetic: decade i, midpoint k of linspace(0.1, 1, n). */
function exactMap(signed: boolean): number[] {
  const data: number[] = [];
  for (let i = 0; i < 7; i++) {
    const n = signed ? 2 ** i + 1 : 2 ** (i + 1) + 1;
    for (let k = 0; k < n - 1; k++) {
      const mean = 0.1 + ((k + 0.5) * 0.9) / (n - 1);
      data.push(10 ** (i - 6) * mean);
      if (signed) data.push(-(10 ** (i - 6)) * mean);
    }
  }
  return [...data, 0, 1].sort((a, b) => a - b);
}

describe('createDynamicMap (bitsandbytes create_dynamic_map)', () => {
  for (const signed of [true, false]) {
    it(`${signed ? 'signed (first moment)' : 'unsigned (second moment)'}: 256 float32 codes, bitsandbytes' values`, () => {
      const code = createDynamicMap(signed);
      const exact = exactMap(signed);
      expect(code.length).toBe(256);
      expect(exact.length).toBe(256);
      for (let i = 0; i < 256; i++) {
        expect(Math.fround(code[i])).toBe(code[i]);
        // float32 rounding of the step, of each boundary, of their mean, of 10^(i-6) and of the product: ≤ 6 ulp.
        expect(Math.abs(code[i] - exact[i]), `code[${i}] = ${code[i]} vs ${exact[i]}`).toBeLessThanOrEqual(
          6 * 2 ** -24 * Math.abs(exact[i]),
        );
        if (i > 0) expect(code[i]).toBeGreaterThan(code[i - 1]);
      }
      expect(code[255]).toBe(1);
      if (signed) {
        expect(code[127]).toBe(0);
        for (let i = 0; i < 127; i++) expect(code[i]).toBe(-code[254 - i]);
        // The smallest magnitude: 10^-6 times the mean of linspace(0.1, 1, 2) = 0.55.
        expect(code[128]).toBe(Math.fround(Math.fround(1e-6) * Math.fround(0.55)));
        expect(code[0]).toBeCloseTo(-(0.1 + (63.5 * 0.9) / 64), 6);
      } else {
        expect(code[0]).toBe(0);
        // 10^-6 times the first midpoint of linspace(0.1, 1, 3) = [0.1, 0.55, 1].
        expect(code[1] / 3.25e-7).toBeCloseTo(1, 6);
        expect(code[254]).toBeCloseTo(0.1 + (127.5 * 0.9) / 128, 6);
      }
    });
  }
});
