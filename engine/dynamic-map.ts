// bitsandbytes' 8-bit dynamic quantization map (Dettmers 2015, "8-Bit Approximations for Parallelism in Deep
// Learning"), the code its blockwise 8-bit optimizers store moments in: bitsandbytes/functional.py
// `create_dynamic_map(signed, max_exponent_bits=7, total_bits=8)` at 95f9af30, which AdamW8bit fills once
// (optim/optimizer.py `fill_qmap`: signed for the first moment, unsigned for the second), and the code the signed
// map is for double-quantized NF4 block scales (engine/nf4.ts; quantize_blockwise's default). Decade i = 0..6 holds the
// midpoints of torch.linspace(0.1, 1, n) scaled by 10^(i-6), n = 2^i + 1 (signed, mirrored by its negatives) or
// 2^(i+1) + 1 (unsigned); then 0 and 1.0; sorted. 256 float32 values either way.

/** torch.linspace(start, end, steps) in float32, its CPU kernel's scalar path (aten RangeFactoriesKernel.cpp): the
 *  step in float32, the first half counted up from start and the second half down from end. */
function linspaceF32(start: number, end: number, steps: number): number[] {
  const f = Math.fround;
  const [a, b] = [f(start), f(end)];
  const step = f(f(b - a) / (steps - 1));
  const halfway = Math.floor(steps / 2);
  return Array.from({ length: steps }, (_, i) => (i < halfway ? f(a + f(step * i)) : f(b - f(step * (steps - i - 1)))));
}

/** The 256 codes, ascending. */
export function createDynamicMap(signed: boolean): Float32Array {
  const f = Math.fround;
  const data: number[] = [];
  for (let i = 0; i < 7; i++) {
    const boundaries = linspaceF32(0.1, 1, signed ? 2 ** i + 1 : 2 ** (i + 1) + 1);
    // torch multiplies a float32 tensor by a Python float in float32 (the scalar rounded first).
    const scale = f(10 ** (i - 6));
    const means = boundaries.slice(1).map((b, k) => f(f(boundaries[k] + b) / 2));
    data.push(...means.map((m) => f(scale * m)));
    if (signed) data.push(...means.map((m) => f(-scale * m)));
  }
  data.push(0, 1);
  if (data.length !== 256) throw new Error(`createDynamicMap: ${data.length} codes, expected 256`);
  return Float32Array.from(data.sort((x, y) => x - y));
}

/** Elements per absmax block of bitsandbytes' 8-bit blockwise optimizer state (optimizer.py `init_state`). */
export const OPTIMIZER_8BIT_BLOCK = 256;

/** Parameters with fewer elements keep 32-bit moments (bitsandbytes' `min_8bit_size` default). */
export const MIN_8BIT_SIZE = 4096;
