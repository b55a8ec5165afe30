// NF4 on the host (engine/nf4.ts) against a port of bitsandbytes' own quantizer (test/support/bitsandbytes-nf4.ts,
// from bitsandbytes/backends/default/ops.py): the packed bytes and the block scales bit for bit on normal
// weights, odd counts (one padded nibble), a partial last block, all-zero blocks (whole and partial), values
// exactly on the midpoints between codes (ties go to the lower code) and ±absmax; dequantization equal to
// bitsandbytes'; and re-quantizing a dequantized tensor — in float32, or rounded to bf16 as a saved checkpoint
// holds it — gives the same codes, so a checkpoint saved from a 4-bit run resumes on the same base. Double
// quantization (compressNf4Statistics) against the port of quantize_4bit(compress_statistics=True): the 8-bit codes
// of the scales, their per-256 absmax and the offset bit for bit, per part of a fused tensor, and the scales
// dequantized as bitsandbytes does.
import { describe, it, expect } from 'vitest';
import {
  NF4_BLOCK,
  NF4_CODE,
  NF4_NESTED_BLOCK,
  compressNf4Statistics,
  dequantizeNf4,
  nf4BlockScales,
  nf4Sizes,
  quantizeNf4,
} from '../../engine/nf4.ts';
import { roundToHalf } from '../../engine/index.ts';
import { createDynamicMap } from '../../engine/dynamic-map.ts';
import {
  bnbDequantizeNf4,
  bnbNestedAbsmax,
  bnbQuantizeNf4,
  bnbQuantizeNf4Nested,
} from '../support/bitsandbytes-nf4.ts';
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

describe('NF4 double quantization (compress_statistics)', () => {
  const map = createDynamicMap(true);

  /** The statistics words split into bitsandbytes' fields (engine/nf4.ts's layout). */
  function fields(statistics: Uint32Array, blocks: number) {
    const floats = new Float32Array(statistics.buffer);
    const pairs = 256 + Math.ceil(blocks / 4);
    const nested = Math.ceil(blocks / NF4_NESTED_BLOCK);
    return {
      map: floats.subarray(0, 256),
      qabsmax: new Uint8Array(statistics.buffer, 256 * 4, blocks),
      absmax2: Float32Array.from({ length: nested }, (_, j) => floats[pairs + 2 * j]),
      offsets: Float32Array.from({ length: nested }, (_, j) => floats[pairs + 2 * j + 1]),
    };
  }

  it("equals bitsandbytes' codes, absmax₂, offset and dequantized scales; one 256-block, several, a partial last", () => {
    for (const [n, seed] of [
      [64, 11],
      [64 * 256, 12],
      [64 * 700 + 5, 13],
      [64 * 300, 14],
    ]) {
      // Weights whose scale drifts across the tensor, so the block absmaxes spread around their mean.
      const values = normal(n, seed).map((x, i) => x * (1 + (3 * i) / n));
      const { absmax } = quantizeNf4(values);
      const statistics = compressNf4Statistics(absmax);
      expect(statistics.length, `n=${n}`).toBe(nf4Sizes(n, true).statistics);
      const ours = fields(statistics, absmax.length);
      const theirs = bnbQuantizeNf4Nested(values, map);
      expect(ours.map, `n=${n}: map`).toEqual(map);
      expect(ours.qabsmax, `n=${n}: codes`).toEqual(theirs.qabsmax);
      expect(ours.absmax2, `n=${n}: absmax2`).toEqual(theirs.absmax2);
      expect([...new Set(ours.offsets)], `n=${n}: offset`).toEqual([theirs.offset]);
      const scales = nf4BlockScales(statistics, absmax.length);
      expect(scales, `n=${n}: dequantized scales`).toEqual(
        bnbNestedAbsmax(theirs.qabsmax, theirs.absmax2, theirs.offset, map),
      );
      // The 8-bit code's largest step (near ±1) is 0.9/64: a scale is off by at most half of it times its absmax₂.
      for (const [b, scale] of scales.entries())
        expect(Math.abs(scale - absmax[b]), `n=${n} block ${b}`).toBeLessThanOrEqual(
          (0.9 / 128) * ours.absmax2[Math.floor(b / NF4_NESTED_BLOCK)] * (1 + 1e-4),
        );
    }
  });

  it('a fused tensor: each part as bitsandbytes quantizes its own nn.Linear, with its own offset', () => {
    const q = normal(64 * 512, 21);
    const k = normal(64 * 256, 22, 0.05);
    const v = normal(64 * 100, 23, 0.01);
    const fused = Float32Array.from([...q, ...k, ...v]);
    const { absmax } = quantizeNf4(fused);
    const statistics = compressNf4Statistics(absmax, [512, 256, 100]);
    const ours = fields(statistics, absmax.length);
    const parts = [q, k, v].map((part) => bnbQuantizeNf4Nested(part, map));
    expect(ours.qabsmax).toEqual(Uint8Array.from(parts.flatMap((p) => [...p.qabsmax])));
    expect(ours.absmax2).toEqual(Float32Array.from(parts.flatMap((p) => [...p.absmax2])));
    expect(ours.offsets).toEqual(Float32Array.from(parts.flatMap((p) => [...p.absmax2].map(() => p.offset))));
    expect(() => compressNf4Statistics(absmax, [500, 268, 100])).toThrow(
      /compressNf4Statistics: part 0 has 500 blocks, not whole 256-blocks/,
    );
  });

  it('stores 4 + 8/64 + 64/16384 bits per weight, plus the 1 KiB map per tensor', () => {
    const count = 64 * 256 * 8;
    expect((nf4Sizes(count, true).bytes - 1024) * 8).toBe(count * (4 + 8 / 64 + 64 / 16384));
  });
});
