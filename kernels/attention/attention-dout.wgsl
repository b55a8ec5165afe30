// attention dOut load, shared by the backward passes that bind dOut (dq, dkdv; the launcher prepends it): elements
// 4*d4 .. 4*d4+3 of a dOut row as attention.wgsl's loadQ reads q, zero past HS.

fn loadDOut(base: u32, d4: u32) -> vec4<f32> {
  let d = base + 4u * d4;
  if (4u * d4 + 4u <= HS) { return vec4<f32>(dOut[d], dOut[d + 1u], dOut[d + 2u], dOut[d + 3u]); }
  let n = HS - 4u * d4;
  return vec4<f32>(dOut[d], select(0.0, dOut[d + 1u], n > 1u), select(0.0, dOut[d + 2u], n > 2u), 0.0);
}
