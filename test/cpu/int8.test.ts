// LLM.int8's weight storage on the host (engine/int8.ts) against a port of bitsandbytes' Int8Params quantizer
// (test/support/bitsandbytes-int8.ts): codes and row scales bit for bit on normal weights, on rows with values
// exactly halfway between two codes (torch.round: to the even one), a zero row, values that round in float16 first;
// dequantization equal to int8_vectorwise_dequant's; the byte order bitsandbytes' CB has.
import { describe, it, expect } from 'vitest';
import { dequantizeInt8Rows, int8CodeAt, int8Sizes, quantizeInt8Rows } from '../../engine/int8.ts';
import { bnbInt8ParamsQuantize, bnbInt8VectorwiseDequant } from '../support/bitsandbytes-int8.ts';
import { randomArray } from '../support/arrays.ts';

function expectSameAsBitsandbytes(values: Float32Array, rows: number, cols: number, what: string) {
  const ours = quantizeInt8Rows(values, rows, cols);
  const theirs = bnbInt8ParamsQuantize(values, rows, cols);
  expect(ours.codes.length, what).toBe(int8Sizes(rows, cols).words);
  expect(new Int8Array(ours.codes.buffer, 0, rows * cols), `${what}: codes`).toEqual(theirs.CB);
  expect(ours.scb, `${what}: SCB`).toEqual(theirs.SCB);
  expect(dequantizeInt8Rows(ours.codes, ours.scb, rows, cols), `${what}: dequantized`).toEqual(
    bnbInt8VectorwiseDequant(theirs.CB, theirs.SCB, cols),
  );
  return ours;
}

describe('int8 row-wise quantization (LLM.int8 weights)', () => {
  it("equals bitsandbytes' Int8Params on normal weights and odd shapes", () => {
    for (const [rows, cols, seed] of [
      [1, 1, 1],
      [7, 13, 2],
      [64, 96, 3],
      [3, 1000, 4],
    ])
      expectSameAsBitsandbytes(randomArray(rows * cols, seed, 0.05), rows, cols, `[${rows}, ${cols}]`);
  });

  it('halfway values go to the even code, a zero row stays zero, float16 rounds first', () => {
    // Row 0: absmax 127, so the scale is 1 and x.5 lands exactly halfway: 0.5 → 0, 1.5 → 2, 2.5 → 2, −2.5 → −2.
    // Row 1: zeros. Row 2: 1 + 2⁻¹² is 1 in float16 (10 mantissa bits), so it quantizes as 1 (code 127, not 126.97).
    const values = Float32Array.from([
      127,
      0.5,
      1.5,
      2.5,
      -2.5,
      -127,
      0,
      0,
      0,
      0,
      0,
      0,
      1 + 2 ** -12,
      1,
      -1,
      0.5,
      0,
      0,
    ]);
    const { codes, scb } = expectSameAsBitsandbytes(values, 3, 6, 'halfway, zero, float16');
    expect(Array.from({ length: 6 }, (_, i) => int8CodeAt(codes, i))).toEqual([127, 0, 2, 2, -2, -127]);
    expect(scb[1]).toBe(0);
    expect(int8CodeAt(codes, 12)).toBe(127);
    expect(scb[2]).toBe(1);
  });

  it('refuses a weight beyond float16, and stores 8 bits per weight plus 32 per row', () => {
    expect(() => quantizeInt8Rows(Float32Array.from([1, 70000]), 1, 2)).toThrow(
      /quantizeInt8Rows: row 0 holds a value beyond float16's range/,
    );
    expect(int8Sizes(4096, 1024).bytes).toBe(4096 * 1024 + 4096 * 4);
  });
});
