// attention backward dkdv: gradient stores when dk and dv share one buffer (binding dkv, e.g. the fused dqkv); under
// `accumulate` added to it (select: an overwrite stores the value bit for bit).

fn storeDk(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dkv[d] = select(x.x, dkv[d] + x.x, params.accumulate != 0u);
  if (4u * d4 + 1u < HS) { dkv[d + 1u] = select(x.y, dkv[d + 1u] + x.y, params.accumulate != 0u); }
  if (4u * d4 + 2u < HS) { dkv[d + 2u] = select(x.z, dkv[d + 2u] + x.z, params.accumulate != 0u); }
  if (4u * d4 + 3u < HS) { dkv[d + 3u] = select(x.w, dkv[d + 3u] + x.w, params.accumulate != 0u); }
}

fn storeDv(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dkv[d] = select(x.x, dkv[d] + x.x, params.accumulate != 0u);
  if (4u * d4 + 1u < HS) { dkv[d + 1u] = select(x.y, dkv[d + 1u] + x.y, params.accumulate != 0u); }
  if (4u * d4 + 2u < HS) { dkv[d + 2u] = select(x.z, dkv[d + 2u] + x.z, params.accumulate != 0u); }
  if (4u * d4 + 3u < HS) { dkv[d + 3u] = select(x.w, dkv[d + 3u] + x.w, params.accumulate != 0u); }
}
