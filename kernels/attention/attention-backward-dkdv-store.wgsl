// attention backward dkdv: gradient stores when dk and dv are separate buffers (bindings dk, dv); under
// `accumulate` added to them (select: an overwrite stores the value bit for bit).

fn storeDk(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dk[d] = select(x.x, dk[d] + x.x, params.accumulate != 0u);
  if (4u * d4 + 1u < HS) { dk[d + 1u] = select(x.y, dk[d + 1u] + x.y, params.accumulate != 0u); }
  if (4u * d4 + 2u < HS) { dk[d + 2u] = select(x.z, dk[d + 2u] + x.z, params.accumulate != 0u); }
  if (4u * d4 + 3u < HS) { dk[d + 3u] = select(x.w, dk[d + 3u] + x.w, params.accumulate != 0u); }
}

fn storeDv(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dv[d] = select(x.x, dv[d] + x.x, params.accumulate != 0u);
  if (4u * d4 + 1u < HS) { dv[d + 1u] = select(x.y, dv[d + 1u] + x.y, params.accumulate != 0u); }
  if (4u * d4 + 2u < HS) { dv[d + 2u] = select(x.z, dv[d + 2u] + x.z, params.accumulate != 0u); }
  if (4u * d4 + 3u < HS) { dv[d + 3u] = select(x.w, dv[d + 3u] + x.w, params.accumulate != 0u); }
}
