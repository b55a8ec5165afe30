// NF4, the 4-bit NormalFloat format of QLoRA (Dettmers et al. 2023) as bitsandbytes stores it
// (bitsandbytes/backends/default/ops.py `quantize_4bit` / `dequantize_4bit`, which its CUDA kernels match): a
// tensor flattened row-major into blocks of 64 values, each block scaled by its absolute maximum into [-1, 1] and
// each value replaced by the index of the nearest of 16 codes (ties to the lower code); two indices per byte, the
// even element in the high nibble. Bytes sit in 32-bit words little-endian, as a u32 buffer holds them, so byte j
// of bitsandbytes' packed tensor is byte j of the words here. No double quantization: the block scales stay
// float32 (0.5 + 4/64 = 0.5625 bytes per weight, 4.5 bits).
import { BYTES_PER_ELEMENT } from './tensor.ts';

/** bitsandbytes' NF4 code (functional.py get_4bit_type("nf4"); utils.py _NF4_QUANT_TABLE), float32 values. */
export const NF4_CODE: readonly number[] = [
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
];

/** Values per absmax block (bitsandbytes' quantize_4bit default blocksize). */
export const NF4_BLOCK = 64;

/** Elements per 32-bit word of codes. */
const PER_WORD = 8;

/** The bucket boundaries: float32 midpoints of neighbouring codes, as bitsandbytes computes them. */
const MIDPOINTS = NF4_CODE.slice(1).map((c, i) => Math.fround(Math.fround(NF4_CODE[i] + c) / 2));

/** The storage of `count` values: words of codes and float32 block scales. */
export function nf4Sizes(count: number): { words: number; blocks: number; bytes: number } {
  const words = Math.ceil(count / PER_WORD);
  const blocks = Math.ceil(count / NF4_BLOCK);
  return { words, blocks, bytes: (words + blocks) * BYTES_PER_ELEMENT };
}

/** The code index of a value already scaled into [-1, 1]: how many midpoints lie strictly below it. */
function codeIndex(scaled: number): number {
  let lo = 0;
  let hi = MIDPOINTS.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (MIDPOINTS[mid] < scaled) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** `values` (float32) quantized as bitsandbytes' quantize_4bit(quant_type="nf4", blocksize=64) does. */
export function quantizeNf4(values: ArrayLike<number>): { codes: Uint32Array; absmax: Float32Array } {
  const n = values.length;
  const { words, blocks } = nf4Sizes(n);
  const codes = new Uint32Array(words);
  const absmax = new Float32Array(blocks);
  const full = n - (n % NF4_BLOCK);
  for (let block = 0; block < blocks; block++) {
    const start = block * NF4_BLOCK;
    const end = Math.min(start + NF4_BLOCK, n);
    let max = 0;
    for (let i = start; i < end; i++) max = Math.max(max, Math.abs(Math.fround(values[i])));
    // Whole blocks multiply by a float32 reciprocal and keep a zero block's absmax 0; the partial last block divides
    // and stores its clamped maximum (ops.py's two branches).
    const clamped = Math.max(Math.fround(max), 1e-38);
    const partial = start >= full;
    const inverse = Math.fround(1 / Math.fround(clamped));
    absmax[block] = partial ? clamped : max;
    for (let i = start; i < end; i++) {
      const x = Math.fround(values[i]);
      const scaled = partial ? Math.fround(x / absmax[block]) : Math.fround(x * inverse);
      const code = codeIndex(Math.min(1, Math.max(-1, scaled)));
      codes[i >> 3] |= code << (8 * ((i >> 1) & 3) + ((i & 1) === 0 ? 4 : 0));
    }
  }
  // An odd count pads one zero-scaled value, which is code 7 (0.0) in the last low nibble.
  if (n % 2 === 1) codes[n >> 3] |= 7 << (8 * ((n >> 1) & 3));
  return { codes, absmax };
}

/** The code index of element i. */
export function nf4CodeAt(codes: Uint32Array, i: number): number {
  const byte = (codes[i >> 3] >>> (8 * ((i >> 1) & 3))) & 0xff;
  return (i & 1) === 0 ? byte >> 4 : byte & 15;
}

/** The `count` float32 values NF4 codes stand for: code × its block's absmax. */
export function dequantizeNf4(codes: Uint32Array, absmax: Float32Array, count: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = NF4_CODE[nf4CodeAt(codes, i)] * absmax[Math.floor(i / NF4_BLOCK)];
  return out;
}
