// weighted_sum: out[0] = Σ_i values[i]·weights[i] over i < n (values, weights: (≥ n), out: (1)).
// v1: one workgroup of 256 lanes, lane-strided partials then workgroupSum (reduce.wgsl): a fixed order.

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lane: u32) {
  var sum = 0.0;
  for (var i = lane; i < params.n; i = i + LANES) { sum = sum + values[i] * weights[i]; }
  let total = workgroupSum(lane, sum);
  if (lane == 0u) { out[0] = total; }
}
