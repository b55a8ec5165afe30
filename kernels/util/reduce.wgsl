// Deterministic reductions: lane-strided partial sums, then workgroupSum's fixed tree (workgroup-sum.wgsl), so the
// same inputs give the same bits on every run (no float atomics).
// weighted_sum: out[0] = Σ_i values[i]·weights[i] over i < n (values, weights: (≥ n), out: (1)); one workgroup.
// sum_squares:  out[outOffset + w] = Σ x[i]² (square = 1) or Σ x[i] (square = 0) over workgroup w's grid-stride
//               share of x, (n4) vec4s. The gradient norm runs it twice: per-workgroup partials of every
//               tensor into one scratch, then one workgroup adding those partials (square = 0).
// v1: 256 lanes; vec4 loads in sum_squares.

const WG = 256u;

//// weighted_sum
@compute @workgroup_size(WG)
fn weighted_sum(@builtin(local_invocation_index) lane: u32) {
  var sum = 0.0;
  for (var i = lane; i < params.n; i += WG) { sum += values[i] * weights[i]; }
  let total = workgroupSum(lane, sum);
  if (lane == 0u) { out[0] = total; }
}

//// sum_squares
@compute @workgroup_size(WG)
fn sum_squares(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  var sum = vec4<f32>(0.0);
  for (var i = wid.x * WG + lane; i < params.n4; i += params.workgroups * WG) {
    let value = x[i];
    sum += select(value, value * value, params.square == 1u);
  }
  let total = workgroupSum(lane, (sum.x + sum.y) + (sum.z + sum.w));
  if (lane == 0u) { out[params.outOffset + wid.x] = total; }
}
