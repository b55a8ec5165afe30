// matmul's B loads for a half-precision B (a frozen model's bf16 or f16 weights), unpacked to float32 as they
// are read; all arithmetic stays float32. The launcher prepends `unpackPair(w: u32) -> vec2<f32>` for the
// dtype: bf16 is the top half of a float32 (a 16-bit shift, no device feature needed), f16 unpack2x16float.
// Bindings: b as vec2<u32> (4 elements per load), b4 as vec4<u32> (8 elements per load). On lavapipe a load
// costs the same whatever its width, so a vec4<u32> brings 8 weights for the price of the 4 a vec4<f32> brings.

const B_HALF = true;

fn bElement(i: u32) -> f32 {
  let q = b[i / 4u];
  return unpackPair(select(q.x, q.y, (i & 2u) != 0u))[i & 1u];
}

fn bQuad(q: u32) -> vec4<f32> {
  let w = b[q];
  return vec4<f32>(unpackPair(w.x), unpackPair(w.y));
}

fn bOctet(o: u32) -> mat2x4<f32> {
  let w = b4[o];
  return mat2x4<f32>(vec4<f32>(unpackPair(w.x), unpackPair(w.y)), vec4<f32>(unpackPair(w.z), unpackPair(w.w)));
}
