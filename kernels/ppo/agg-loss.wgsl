// agg-loss: verl's agg_loss of lossMat [B, T] under mask, as weights: grad[b,t] = d loss / d lossMat[b,t]
// (aggWeight) and rowPartials[b] = (Σ_t grad·lossMat, Σ_t mask); loss-partials sums the rows.
// Needs workgroup-reduce.wgsl prepended. Harness only, not on the training path: the verl harness
// (tools/verl/losses.ts) and tests dispatch it; the trainer's policy-loss and value-loss aggregate in-kernel.
// v1: one 64-lane workgroup per row: a count pass, then a weight-and-loss pass, fixed-order tree reductions.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  let base = row * params.T;
  var count = 0.0;
  for (var t = lid; t < params.T; t = t + 64u) { count = count + mask[base + t]; }
  let rowCount = workgroupSum4(lid, 64u, vec4<f32>(count, 0.0, 0.0, 0.0)).x;
  var loss = 0.0;
  for (var t = lid; t < params.T; t = t + 64u) {
    let w = aggWeight(params.aggMode, params.aggScale, mask[base + t], rowCount);
    grad[base + t] = w;
    if (w != 0.0) { loss = loss + w * lossMat[base + t]; }
  }
  let total = workgroupSum4(lid, 64u, vec4<f32>(loss, 0.0, 0.0, 0.0)).x;
  if (lid == 0u) {
    rowPartials[2u * row] = total;
    rowPartials[2u * row + 1u] = rowCount;
  }
}
