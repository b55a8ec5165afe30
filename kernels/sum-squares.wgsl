// sum_squares: out[outOffset + w] = Σ x[i]² (square = 1) or Σ x[i] (square = 0) over workgroup w's grid-stride
// share of x: (n4) vec4s. The gradient norm runs it twice: per-workgroup partials of every tensor into one
// scratch, then one workgroup adding those partials (square = 0), so the order is fixed end to end.
// v1: 256 lanes, vec4 loads, workgroupSum (reduce.wgsl) per workgroup.

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  var sum = vec4<f32>(0.0);
  for (var i = wid.x * LANES + lane; i < params.n4; i = i + params.workgroups * LANES) {
    let value = x[i];
    sum = sum + select(value, value * value, params.square == 1u);
  }
  let total = workgroupSum(lane, (sum.x + sum.y) + (sum.z + sum.w));
  if (lane == 0u) { out[params.outOffset + wid.x] = total; }
}
