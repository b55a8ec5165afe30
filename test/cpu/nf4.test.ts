// NF4 on the host (engine/nf4.ts) against a port of bitsandbytes' own quantizer (test/support/bitsandbytes-nf4.ts,
// from bitsandbytes/backends/default/ops.py): the packed bytes and the block scales bit for bit on normal
// weights, odd counts (one padded nibble), a partial last block, all-zero blocks (whole and partial), values
// exactly on the midpoints between codes (ties go to the lower code) and ±absmax; dequantization equal to
// bitsandbytes'; and re-quantizing a dequantized tensor — in float32, or rounded to bf16 as a saved checkpoint
// holds it — gives the same codes, so a checkpoint saved from a 4-bit run resumes on the same base.
import { describe, it, expect } from 'vitest';
import { NF4_BLOCK, NF4_CODE, dequantizeNf4, nf4Sizes, quantizeNf4 } from '../../engine/nf4.ts';
import { roundToHalf } from '../../engine/index.ts';
import { bnbDequantizeNf4, bnbQuantizeNf4 } from '../support/bitsandbytes-nf4.ts';
import { seededRandom } from '../support/arrays.ts';

/** Normal values (Box–Muller) times `scale`, as a weight matrix's are. */
function normal(n: number, seed: number, scale = 0.02): Float32Array {
  const random = seededRandom(seed);
  return Float32Array.from({ length: n }, () => {
    const u = Math.max(random(), 1e-12);
    return scale * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  });
}

/** The bytes of the code words, in memory order (little-endian words), as many as bitsandbytes packs. */
function bytesOf(codes: Uint32Array, count: number): Uint8Array {
  return new Uint8Array(codes.buffer, codes.byteOffset, Math.ceil(count / 2));
}

function expectSameAsBitsandbytes(values: Float32Array, what: string): void {
  const ours = quantizeNf4(values);
  const theirs = bnbQuantizeNf4(values);
  expect(ours.codes.length, what).toBe(nf4Sizes(values.length).words);
  expect(bytesOf(ours.codes, values.length), `${what}: packed codes`).toEqual(theirs.packed);
  expect(ours.absmax, `${what}: absmax`).toEqual(theirs.absmax);
  expect(dequantizeNf4(ours.codes, ours.absmax, values.length), `${what}: dequantized`).toEqual(
    bnbDequantizeNf4(theirs.packed, theirs.absmax, values.length),
  );
}

describe('NF4 quantization', () => {
  it("equals bitsandbytes' quantize_4bit on normal weights, odd counts and a partial last block", () => {
    for (const [n, seed] of [
      [64, 1],
      [4096, 2],
      [4096 + 37, 3],
      [63, 4],
      [1, 5],
      [129, 6],
    ])
      expectSameAsBitsandbytes(normal(n, seed), `n=${n}`);
  });

  it('zero blocks, ties on the midpoints and ±absmax', () => {
    // A block with absmax 1 whose other values sit exactly on each float32 midpoint (tie: the lower code) and on
    // each code; then a zero block, a block of one non-zero value, and a zero partial block.
    const midpoints = NF4_CODE.slice(1).map((c, i) => Math.fround(Math.fround(NF4_CODE[i] + c) / 2));
    const ties = [1, -1, ...midpoints, ...NF4_CODE, ...midpoints.map((m) => -m)];
    const block = new Float32Array(NF4_BLOCK);
    block.set(ties.slice(0, NF4_BLOCK));
    const oneValue = new Float32Array(NF4_BLOCK);
    oneValue[17] = -3.5;
    const values = Float32Array.from([...block, ...new Float32Array(NF4_BLOCK), ...oneValue, 0, 0, 0]);
    expectSameAsBitsandbytes(values, 'ties and zeros');
    const { codes, absmax } = quantizeNf4(values);
    const q = dequantizeNf4(codes, absmax, values.length);
    // Ties go down: the midpoint between codes 7 and 8 (0.0398) dequantizes to 0, code 7.
    expect(q[2 + 7]).toBe(0);
    expect(q[0]).toBe(1);
    expect(q[1]).toBe(-1);
    expect([...q.subarray(NF4_BLOCK, 2 * NF4_BLOCK)].every((v) => v === 0)).toBe(true);
    expect(q[2 * NF4_BLOCK + 17]).toBe(-3.5);
    expect(absmax[1]).toBe(0);
    expect(absmax[3]).toBe(Math.fround(1e-38));
  });

  it('re-quantizing dequantized weights, in float32 or rounded to bf16, gives the same codes', () => {
    const values = normal(64 * 50 + 10, 7);
    const { codes, absmax } = quantizeNf4(values);
    const dequantized = dequantizeNf4(codes, absmax, values.length);
    for (const [what, again] of [
      ['float32', dequantized],
      ['bf16', roundToHalf('bf16', dequantized)],
    ] as const) {
      const requantized = quantizeNf4(again);
      expect(requantized.codes, what).toEqual(codes);
      if (what === 'float32') expect(requantized.absmax).toEqual(absmax);
    }
  });

  it('stores 4.5 bits per weight', () => {
    expect(nf4Sizes(64 * 1024).bytes * 8).toBe(4.5 * 64 * 1024);
  });
});
