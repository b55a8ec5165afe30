// attention backward dkdv: gradient stores when dk and dv are separate buffers (bindings dk, dv).

fn storeDk(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dk[d] = x.x;
  if (4u * d4 + 1u < HS) { dk[d + 1u] = x.y; }
  if (4u * d4 + 2u < HS) { dk[d + 2u] = x.z; }
  if (4u * d4 + 3u < HS) { dk[d + 3u] = x.w; }
}

fn storeDv(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dv[d] = x.x;
  if (4u * d4 + 1u < HS) { dv[d + 1u] = x.y; }
  if (4u * d4 + 2u < HS) { dv[d + 2u] = x.z; }
  if (4u * d4 + 3u < HS) { dv[d + 3u] = x.w; }
}
