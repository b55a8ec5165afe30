// A line-by-line port of bitsandbytes' default-backend NF4 kernels (bitsandbytes-foundation/bitsandbytes @ 95f9af30,
// bitsandbytes/backends/default/ops.py: `bitsandbytes::quantize_4bit` and `_dequantize_4bit_compute`;
// `_get_4bit_quantize_bounds`), torch ops spelled out over float32 arrays, to check engine/nf4.ts against.
// The code table is bitsandbytes' own, typed from backends/utils.py _NF4_QUANT_TABLE (not from engine/nf4.ts).
const CODE = new Float32Array([
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]);

/** midpoints = (code[order[:-1]] + code[order[1:]]) / 2 in float32 (NF4's order is the identity). */
function bounds(): Float32Array {
  const out = new Float32Array(15);
  for (let i = 0; i < 15; i++) out[i] = Math.fround(Math.fround(CODE[i] + CODE[i + 1]) / 2);
  return out;
}

/** torch.bucketize(x, boundaries, right=False): the first i with x <= boundaries[i] (a linear scan). */
function bucketize(x: number, boundaries: Float32Array): number {
  for (let i = 0; i < boundaries.length; i++) if (x <= boundaries[i]) return i;
  return boundaries.length;
}

const clamp = (x: number) => Math.min(1, Math.max(-1, x));

/** quantize_4bit(A, blocksize, "nf4", torch.uint8): the packed bytes and the absmax per block. */
export function bnbQuantizeNf4(A: ArrayLike<number>, blocksize = 64): { packed: Uint8Array; absmax: Float32Array } {
  const b = bounds();
  const flat = Float32Array.from(A);
  const n = flat.length;
  const rem = n % blocksize;
  const full = n - rem;
  const blocks = full / blocksize;
  const absmax: number[] = [];
  const scaled: number[] = [];
  for (let r = 0; r < blocks; r++) {
    const row = flat.subarray(r * blocksize, (r + 1) * blocksize);
    absmax.push(Math.max(...Array.from(row, Math.abs)));
    const inv = Math.fround(1.0 / Math.fround(Math.max(absmax[r], Math.fround(1e-38))));
    for (const x of row) scaled.push(clamp(Math.fround(x * inv)));
  }
  if (rem) {
    const tail = flat.subarray(full);
    const am = Math.fround(Math.max(Math.max(...Array.from(tail, Math.abs)), Math.fround(1e-38)));
    absmax.push(am);
    for (const x of tail) scaled.push(clamp(Math.fround(x / am)));
  }
  if (scaled.length % 2) scaled.push(0);
  const q = scaled.map((x) => bucketize(x, b));
  const packed = new Uint8Array(q.length / 2);
  for (let j = 0; j < packed.length; j++) packed[j] = (q[2 * j] << 4) | q[2 * j + 1];
  return { packed, absmax: Float32Array.from(absmax) };
}

/** dequantize_4bit(A, absmax, blocksize, "nf4", shape=[n], float32). */
export function bnbDequantizeNf4(packed: Uint8Array, absmax: Float32Array, n: number, blocksize = 64): Float32Array {
  const dq = new Float32Array(packed.length * 2);
  for (let j = 0; j < packed.length; j++) {
    dq[2 * j + 1] = CODE[packed[j] & 0xf];
    dq[2 * j] = CODE[packed[j] >> 4];
  }
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = dq[i] * absmax[Math.floor(i / blocksize)];
  return out;
}

// Double quantization (bitsandbytes/functional.py quantize_4bit with compress_statistics=True and
// dequantize_4bit's `if quant_state.nested` branch; backends/default/ops.py `bitsandbytes::quantize_blockwise` and
// `_dequantize_blockwise_compute`): offset = absmax.mean(); quantize_blockwise(absmax - offset, blocksize=256) in
// the signed dynamic map (functional.py create_dynamic_map(), ported in engine/dynamic-map.ts and tested there).
// torch's float32 mean is summed here in float64 and rounded once (see engine/nf4.ts).

/** quantize_blockwise(A, code, blocksize): the uint8 codes and the absmax per block. */
export function bnbQuantizeBlockwise(
  A: ArrayLike<number>,
  code: Float32Array,
  blocksize: number,
): { q: Uint8Array; absmax: Float32Array } {
  const flat = Float32Array.from(A);
  const n = flat.length;
  const rem = n % blocksize;
  const full = n - rem;
  const absmax: number[] = [];
  const scaled: number[] = [];
  for (let r = 0; r < full / blocksize; r++) {
    const row = flat.subarray(r * blocksize, (r + 1) * blocksize);
    absmax.push(Math.max(...Array.from(row, Math.abs)));
    const inv = Math.fround(1.0 / Math.fround(Math.max(absmax[r], Math.fround(1e-38))));
    for (const x of row) scaled.push(clamp(Math.fround(x * inv)));
  }
  if (rem) {
    const am = Math.fround(Math.max(Math.max(...Array.from(flat.subarray(full), Math.abs)), Math.fround(1e-38)));
    absmax.push(am);
    for (const x of flat.subarray(full)) scaled.push(clamp(Math.fround(x / am)));
  }
  const bounds = Float32Array.from({ length: code.length - 1 }, (_, i) =>
    Math.fround(Math.fround(code[i] + code[i + 1]) / 2),
  );
  return { q: Uint8Array.from(scaled, (x) => bucketize(x, bounds)), absmax: Float32Array.from(absmax) };
}

/** quantize_4bit(A, blocksize=64, compress_statistics=True, quant_type="nf4"): packed codes, and the state's
 *  nested fields (absmax as uint8, state2.absmax, offset). */
export function bnbQuantizeNf4Nested(
  A: ArrayLike<number>,
  code: Float32Array,
): { packed: Uint8Array; qabsmax: Uint8Array; absmax2: Float32Array; offset: number } {
  const { packed, absmax } = bnbQuantizeNf4(A);
  let sum = 0;
  for (const a of absmax) sum += a;
  const offset = Math.fround(sum / absmax.length);
  const { q, absmax: absmax2 } = bnbQuantizeBlockwise(
    absmax.map((a) => Math.fround(a - offset)),
    code,
    256,
  );
  return { packed, qabsmax: q, absmax2, offset };
}

/** dequantize_4bit's nested absmax: dequantize_blockwise(qabsmax, state2) (code[q] · absmax2[block] in float32),
 *  then `absmax += offset`. */
export function bnbNestedAbsmax(qabsmax: Uint8Array, absmax2: Float32Array, offset: number, code: Float32Array) {
  return Float32Array.from(qabsmax, (q, i) =>
    Math.fround(Math.fround(code[q] * absmax2[Math.floor(i / 256)]) + offset),
  );
}
