// to-half: float32 values (n) → bf16 or f16 (n), two per output word, element 2i in the low half; round to
// nearest even, as PyTorch's .to(dtype) and engine/half-float.ts (the CPU reference) do. Makes a frozen model's
// half-precision weights from float32 ones on the device (the reference model from the actor).
// v1: one lane per output word, 256 lanes per workgroup; an odd n pads the last word's high half with 0.
// The launcher prepends `toHalf(x: f32) -> u32` for the dtype.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let word = gid.x + gid.y * nwg.x * 256u;
  let n = params.n;
  if (2u * word >= n) { return; }
  let lo = toHalf(values[2u * word]);
  let hi = select(0u, toHalf(values[min(2u * word + 1u, n - 1u)]), 2u * word + 1u < n);
  halves[word] = lo | (hi << 16u);
}

//// bf16
fn toHalf(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  // NaN stays a quiet NaN of the same sign (rounding could carry it into infinity).
  if ((b & 0x7fffffffu) > 0x7f800000u) { return ((b >> 16u) & 0x8000u) | 0x7fc0u; }
  return ((b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u) & 0xffffu;
}

//// f16
// IEEE binary16 with round to nearest even, overflow to ±inf and gradual underflow (pack2x16float leaves
// rounding to the implementation).
fn toHalf(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let sign = (b >> 16u) & 0x8000u;
  let exponent = i32((b >> 23u) & 0xffu);
  let mantissa = b & 0x7fffffu;
  if (exponent == 0xff) { return sign | 0x7c00u | select(0u, 0x200u | (mantissa >> 13u), mantissa != 0u); }
  let e = exponent - 127 + 15;
  if (e >= 0x1f) { return sign | 0x7c00u; }
  if (e <= 0) {
    if (e < -10) { return sign; }
    let full = mantissa | 0x800000u;
    let shift = u32(14 - e);
    let rest = full & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    var r = full >> shift;
    if (rest > half || (rest == half && (r & 1u) != 0u)) { r++; }
    return sign | r;
  }
  var r = (u32(e) << 10u) | (mantissa >> 13u);
  let rest = mantissa & 0x1fffu;
  // A carry out of the mantissa bumps the exponent, up to infinity.
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1u) != 0u)) { r++; }
  return sign | r;
}
