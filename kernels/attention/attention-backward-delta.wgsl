// attention backward, preprocess: stats [B, NH, Tq] vec2 = (lse·log2 e, D = rowsum(dOut∘out)) for the dq and
// dkdv passes (one binding instead of two keeps those within 8 storage buffers). out, dOut [B*Tq, NH*HS].
// v1: one (b, h, t) per lane, 256 lanes, workgroups folded into y past 65535.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.rows) { return; }
  let t = i % params.Tq;
  let bh = i / params.Tq;
  let h = bh % params.NH;
  let b = bh / params.NH;
  let base = (b * params.Tq + t) * params.NH * params.HS + h * params.HS;
  var delta = 0.0;
  for (var d = 0u; d < params.HS; d++) { delta = fma(dOut[base + d], out[base + d], delta); }
  stats[i] = vec2<f32>(lse[i] * 1.4426950408889634, delta);
}
