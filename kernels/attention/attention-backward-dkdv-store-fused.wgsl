// attention backward dkdv: gradient stores when dk and dv share one buffer (binding dkv, e.g. the fused dqkv).

fn storeDk(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dkv[d] = x.x;
  if (4u * d4 + 1u < HS) { dkv[d + 1u] = x.y; }
  if (4u * d4 + 2u < HS) { dkv[d + 2u] = x.z; }
  if (4u * d4 + 3u < HS) { dkv[d + 3u] = x.w; }
}

fn storeDv(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dkv[d] = x.x;
  if (4u * d4 + 1u < HS) { dkv[d + 1u] = x.y; }
  if (4u * d4 + 2u < HS) { dkv[d + 2u] = x.z; }
  if (4u * d4 + 3u < HS) { dkv[d + 3u] = x.w; }
}
