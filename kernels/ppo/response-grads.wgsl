// response-grads: the actor loss's per-token coefficients (d loss/d log-prob, d loss/d entropy) for response tokens,
// grads [B, T] of vec2, moved to the sequence positions that predict them, dLogprobs and dEntropy [B, S]
// (response token t is predicted at position S − T − 1 + t, as response-values gathers; zeros elsewhere).
// v1: one sequence position per lane, 256 lanes, workgroups folded into y past 65535.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.B * params.S) { return; }
  let b = i / params.S;
  let s = i % params.S;
  let start = params.S - params.T - 1u;
  var g = vec2<f32>(0.0);
  if (s >= start && s < start + params.T) { g = grads[b * params.T + s - start]; }
  dLogprobs[i] = g.x;
  dEntropy[i] = g.y;
}
