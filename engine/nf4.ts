// NF4, the 4-bit NormalFloat format of QLoRA (Dettmers et al. 2023) as bitsandbytes stores it
// (bitsandbytes/backends/default/ops.py `quantize_4bit` / `dequantize_4bit`, which its CUDA kernels match): a
// tensor flattened row-major into blocks of 64 values, each block scaled by its absolute maximum into [-1, 1] and
// each value replaced by the index of the nearest of 16 codes (ties to the lower code); two indices per byte, the
// even element in the high nibble. Bytes sit in 32-bit words little-endian, as a u32 buffer holds them, so byte j
// of bitsandbytes' packed tensor is byte j of the words here. The block scales stay float32 (0.5 + 4/64 = 0.5625
// bytes per weight, 4.5 bits), or with double quantization (bitsandbytes' compress_statistics, HF's
// bnb_4bit_use_double_quant) are themselves quantized: their mean (the offset) subtracted, then blocks of 256 of
// them scaled by their absmax into the signed 8-bit dynamic map (functional.py quantize_4bit →
// quantize_blockwise(absmax - offset, blocksize=256)): 1 byte per 64 weights plus 8 bytes per 16,384.
import { createDynamicMap } from './dynamic-map.ts';
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

/** Absmax blocks per block of the second, 8-bit level of double quantization (quantize_blockwise's blocksize). */
export const NF4_NESTED_BLOCK = 256;

/** The signed dynamic map's 256 codes lead a double-quantized statistics tensor, as float32 bits. */
const MAP_WORDS = 256;

/** The bucket boundaries of an ascending code: float32 midpoints of neighbours, as bitsandbytes computes them. */
function midpointsOf(code: ArrayLike<number>): Float32Array {
  return Float32Array.from({ length: code.length - 1 }, (_, i) => Math.fround(Math.fround(code[i] + code[i + 1]) / 2));
}

const MIDPOINTS = midpointsOf(NF4_CODE);
const DYNAMIC_MAP = createDynamicMap(true);
const DYNAMIC_MIDPOINTS = midpointsOf(DYNAMIC_MAP);

/** The storage of `count` values: words of codes and the block statistics — `blocks` float32 scales, or with
 *  `nested` (double quantization) `statistics` u32 words (engine's layout: see compressNf4Statistics). */
export function nf4Sizes(
  count: number,
  nested = false,
): { words: number; blocks: number; statistics: number; bytes: number } {
  const words = Math.ceil(count / PER_WORD);
  const blocks = Math.ceil(count / NF4_BLOCK);
  const statistics = nested ? MAP_WORDS + Math.ceil(blocks / 4) + 2 * Math.ceil(blocks / NF4_NESTED_BLOCK) : blocks;
  return { words, blocks, statistics, bytes: (words + statistics) * BYTES_PER_ELEMENT };
}

/** The code index of a value already scaled into [-1, 1]: how many midpoints lie strictly below it
 *  (torch.bucketize, right=False: ties go to the lower code). */
function codeIndex(scaled: number, midpoints: Float32Array): number {
  let lo = 0;
  let hi = midpoints.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (midpoints[mid] < scaled) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** bitsandbytes' blockwise quantization (backends/default/ops.py, shared by quantize_4bit and
 *  quantize_blockwise): per block of `blocksize` values its absmax, and each value's code index. */
function quantizeBlockwise(
  values: ArrayLike<number>,
  midpoints: Float32Array,
  blocksize: number,
): { indices: Uint8Array; absmax: Float32Array } {
  const n = values.length;
  const indices = new Uint8Array(n);
  const absmax = new Float32Array(Math.ceil(n / blocksize));
  const full = n - (n % blocksize);
  for (let block = 0; block < absmax.length; block++) {
    const start = block * blocksize;
    const end = Math.min(start + blocksize, n);
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
      indices[i] = codeIndex(Math.min(1, Math.max(-1, scaled)), midpoints);
    }
  }
  return { indices, absmax };
}

/** `values` (float32) quantized as bitsandbytes' quantize_4bit(quant_type="nf4", blocksize=64) does; the
 *  absmax float32 (compressNf4Statistics double-quantizes it). */
export function quantizeNf4(values: ArrayLike<number>): { codes: Uint32Array; absmax: Float32Array } {
  const n = values.length;
  const { indices, absmax } = quantizeBlockwise(values, MIDPOINTS, NF4_BLOCK);
  const codes = new Uint32Array(nf4Sizes(n).words);
  for (let i = 0; i < n; i++) codes[i >> 3] |= indices[i] << (8 * ((i >> 1) & 3) + ((i & 1) === 0 ? 4 : 0));
  // An odd count pads one zero-scaled value, which is code 7 (0.0) in the last low nibble.
  if (n % 2 === 1) codes[n >> 3] |= 7 << (8 * ((n >> 1) & 3));
  return { codes, absmax };
}

/** The code index of element i. */
export function nf4CodeAt(codes: Uint32Array, i: number): number {
  const byte = (codes[i >> 3] >>> (8 * ((i >> 1) & 3))) & 0xff;
  return (i & 1) === 0 ? byte >> 4 : byte & 15;
}

/**
 * Double quantization of NF4 block scales, as bitsandbytes' quantize_4bit(compress_statistics=True) does to each
 * tensor: offset = mean(absmax); quantize_blockwise(absmax − offset, signed dynamic map, blocksize=256). `parts`:
 * the blocks of each Hugging Face tensor fused in this one (q/k/v, gate/up), each double-quantized on its own, as
 * bitsandbytes quantizes each nn.Linear; every part but the last must be whole 256-blocks (parameter-store.ts
 * refuses other shapes). The mean is summed in float64 and rounded once (torch sums float32 in its own cascade:
 * the offset may differ by an ulp, far below the 8-bit code's resolution).
 * Layout, u32 words: the 256 map codes (float32 bits, so the kernel reads them from the same binding); one byte
 * per block, four a word little-endian; then per 256-block its absmax and its part's offset (float32 bits).
 */
export function compressNf4Statistics(absmax: Float32Array, parts: readonly number[] = [absmax.length]): Uint32Array {
  const blocks = absmax.length;
  const nested = Math.ceil(blocks / NF4_NESTED_BLOCK);
  const out = new Uint32Array(nf4Sizes(blocks * NF4_BLOCK, true).statistics);
  const floats = new Float32Array(out.buffer);
  floats.set(DYNAMIC_MAP);
  const codes = new Uint8Array(out.buffer, MAP_WORDS * 4, blocks);
  const pairs = MAP_WORDS + Math.ceil(blocks / 4);
  let start = 0;
  for (const [p, size] of parts.entries()) {
    if (p < parts.length - 1 && size % NF4_NESTED_BLOCK !== 0)
      throw new Error(`compressNf4Statistics: part ${p} has ${size} blocks, not whole ${NF4_NESTED_BLOCK}-blocks`);
    const part = absmax.subarray(start, start + size);
    let sum = 0;
    for (const a of part) sum += a;
    const offset = Math.fround(sum / size);
    const { indices, absmax: scales } = quantizeBlockwise(
      part.map((a) => Math.fround(a - offset)),
      DYNAMIC_MIDPOINTS,
      NF4_NESTED_BLOCK,
    );
    codes.set(indices, start);
    const first = start / NF4_NESTED_BLOCK;
    for (const [j, scale] of scales.entries()) {
      floats[pairs + 2 * (first + j)] = scale;
      floats[pairs + 2 * (first + j) + 1] = offset;
    }
    start += size;
  }
  if (start !== blocks || Math.ceil(start / NF4_NESTED_BLOCK) !== nested)
    throw new Error(`compressNf4Statistics: parts cover ${start} blocks, expected ${blocks}`);
  return out;
}

/** The float32 block scales double-quantized statistics stand for: map[code] · absmax₂ + offset, rounded after
 *  each step as bitsandbytes' dequantize_blockwise and `absmax += offset` do. */
export function nf4BlockScales(statistics: Uint32Array, blocks: number): Float32Array {
  const floats = new Float32Array(statistics.buffer, statistics.byteOffset, statistics.length);
  const codes = new Uint8Array(statistics.buffer, statistics.byteOffset + MAP_WORDS * 4, blocks);
  const pairs = MAP_WORDS + Math.ceil(blocks / 4);
  return Float32Array.from(codes, (code, b) => {
    const pair = pairs + 2 * Math.floor(b / NF4_NESTED_BLOCK);
    return Math.fround(Math.fround(floats[code] * floats[pair]) + floats[pair + 1]);
  });
}

/** The `count` float32 values NF4 codes stand for: code × its block's absmax. */
export function dequantizeNf4(codes: Uint32Array, absmax: Float32Array, count: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = NF4_CODE[nf4CodeAt(codes, i)] * absmax[Math.floor(i / NF4_BLOCK)];
  return out;
}
