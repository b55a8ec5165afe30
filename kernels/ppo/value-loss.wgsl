// value-loss: verl's compute_value_loss per row of vpreds/returns/values/mask [B, T]:
//   loss = 0.5·agg(max((v − R)², (clip(v, old ± c) − R)²)),  gradVpreds = d loss / d vpreds,
//   rowPartials[b] = (Σ weighted loss, clipped count, mask count) for loss-partials.
// Gradients follow torch autograd (clip_by_value = max(min(v, hi), lo); max/min split ties in half).
// Needs workgroup-reduce.wgsl prepended.
// v1: one 64-lane workgroup per row: a count pass, then the token pass.

fn pickWithGrad(takeA: bool, tie: bool, a: f32, da: f32, b: f32, db: f32) -> vec2<f32> {
  if (tie) { return vec2<f32>(a, 0.5 * (da + db)); }
  return select(vec2<f32>(b, db), vec2<f32>(a, da), takeA);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  let base = row * params.T;
  var count = 0.0;
  for (var t = lid; t < params.T; t = t + 64u) { count = count + mask[base + t]; }
  let rowCount = workgroupSum4(lid, 64u, vec4<f32>(count, 0.0, 0.0, 0.0)).x;
  var sums = vec4<f32>(0.0);
  for (var t = lid; t < params.T; t = t + 64u) {
    let i = base + t;
    let m = mask[i];
    if (m == 0.0) {
      gradVpreds[i] = 0.0;
      continue;
    }
    let v = vpreds[i];
    let r = returns[i];
    let hi = values[i] + params.cliprangeValue;
    let lo = values[i] - params.cliprangeValue;
    let upper = pickWithGrad(v < hi, v == hi, v, 1.0, hi, 0.0);
    let clipped = pickWithGrad(upper.x > lo, upper.x == lo, upper.x, upper.y, lo, 0.0);
    let l1 = (v - r) * (v - r);
    let l2 = (clipped.x - r) * (clipped.x - r);
    let loss = pickWithGrad(l1 > l2, l1 == l2, l1, 2.0 * (v - r), l2, 2.0 * (clipped.x - r) * clipped.y);
    let w = 0.5 * aggWeight(params.aggMode, params.aggScale, m, rowCount);
    gradVpreds[i] = w * loss.y;
    sums = sums + vec4<f32>(w * loss.x, select(0.0, m, l2 > l1), m, 0.0);
  }
  let total = workgroupSum4(lid, 64u, sums);
  if (lid == 0u) {
    rowPartials[3u * row] = total.x;
    rowPartials[3u * row + 1u] = total.y;
    rowPartials[3u * row + 2u] = total.z;
  }
}
