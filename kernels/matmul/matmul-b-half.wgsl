// matmul's B loads for a half-precision B (a frozen model's bf16 or f16 weights), unpacked to float32 as they
// are read; all arithmetic stays float32. The launcher prepends `unpackPair(w: u32) -> vec2<f32>` for the
// dtype: bf16 is the top half of a float32 (a 16-bit shift, no device feature needed), f16 unpack2x16float.
// Bindings: b as u32 words (2 elements each), b4 as vec2<u32> (4 elements per load, as many as float32's vec4).
// Wider loads did not pay on lavapipe: the register kernel reading 8 halves per vec4<u32> (K % 8 == 0) took
// 1.4-1.8x the CPU time of these quads at decode shapes, and 4-5x as long to compile.

fn bElement(i: u32) -> f32 { return unpackPair(b[i / 2u])[i & 1u]; }

fn bQuad(q: u32) -> vec4<f32> {
  let w = b4[q];
  return vec4<f32>(unpackPair(w.x), unpackPair(w.y));
}
