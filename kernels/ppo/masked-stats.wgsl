// masked-stats: verl's masked_mean / masked_var / masked_whiten over values and mask of n = B*T elements.
// Needs workgroup-reduce.wgsl prepended. moments then whiten are on the training path (the advantage estimators
// whiten); rowSums is harness only: the verl harness (tools/verl/masked-stats.ts) and tests dispatch it.
//   moments:   one 256-lane workgroup; stats = [masked sum, mask count, mean, unbiased var] (two passes, Kahan
//              per lane, fixed-order tree: deterministic). verl's +1e-8 denominators are kept.
//   whiten:    values[i] = (values[i] − mean)·rsqrt(var + 1e-8) (+ mean unless shiftMean) (· mask if maskOutput),
//              in place, 256 lanes per workgroup, folded into y.
//   rowSums:   one 64-lane workgroup per row of length T: stats[2b] = masked sum, stats[2b+1] = masked mean.

struct Kahan { sum: f32, carry: f32 }

fn kahanAdd(acc: Kahan, x: f32) -> Kahan {
  let y = x - acc.carry;
  let t = acc.sum + y;
  return Kahan(t, (t - acc.sum) - y);
}

@compute @workgroup_size(256)
fn moments(@builtin(local_invocation_index) lid: u32) {
  var s = Kahan(0.0, 0.0);
  var c = Kahan(0.0, 0.0);
  for (var i = lid; i < params.n; i = i + 256u) {
    let m = mask[i];
    if (m != 0.0) { s = kahanAdd(s, values[i] * m); }
    c = kahanAdd(c, m);
  }
  let totals = workgroupSum4(lid, 256u, vec4<f32>(s.sum, c.sum, 0.0, 0.0));
  let count = totals.y;
  let mean = totals.x / (count + 1e-8);
  var q = Kahan(0.0, 0.0);
  for (var i = lid; i < params.n; i = i + 256u) {
    let m = mask[i];
    let d = values[i] - mean;
    if (m != 0.0) { q = kahanAdd(q, d * d * m); }
  }
  let squares = workgroupSum4(lid, 256u, vec4<f32>(q.sum, 0.0, 0.0, 0.0)).x;
  if (lid == 0u) {
    stats[0] = totals.x;
    stats[1] = count;
    stats[2] = mean;
    stats[3] = squares / (count + 1e-8) * (count / (count - 1.0));
  }
}

@compute @workgroup_size(256)
fn whiten(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.n) { return; }
  let mean = stats[2];
  var w = (values[i] - mean) * inverseSqrt(stats[3] + 1e-8);
  if (params.shiftMean == 0u) { w = w + mean; }
  if (params.maskOutput != 0u) { w = w * mask[i]; }
  values[i] = w;
}

@compute @workgroup_size(64)
fn rowSums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  var acc = vec4<f32>(0.0);
  for (var t = lid; t < params.T; t = t + 64u) {
    let m = mask[row * params.T + t];
    if (m != 0.0) { acc.x = acc.x + values[row * params.T + t] * m; }
    acc.y = acc.y + m;
  }
  let total = workgroupSum4(lid, 64u, acc);
  if (lid == 0u) {
    stats[2u * row] = total.x;
    stats[2u * row + 1u] = total.x / (total.y + 1e-8);
  }
}
