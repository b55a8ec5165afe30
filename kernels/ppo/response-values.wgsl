// response-values: the critic's value for response token t is the value head's output at the position
// before it (verl: values[:, -T-1:-1]). Sequences are [B, S] (prompt + response, response last), responses [B, T].
//   gather:  response[b, t] = sequence[b, S − T − 1 + t]
//   scatter: sequence[b, s] = response[b, s − (S − T − 1)] inside that window, 0 elsewhere (the backward).
// v1: one element per lane, 256 lanes, workgroups folded into y past 65535.

@compute @workgroup_size(256)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.B * params.T) { return; }
  let b = i / params.T;
  response[i] = sequence[b * params.S + params.S - params.T - 1u + i % params.T];
}

@compute @workgroup_size(256)
fn scatter(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.B * params.S) { return; }
  let b = i / params.S;
  let s = i % params.S;
  let start = params.S - params.T - 1u;
  var g = 0.0;
  if (s >= start && s < start + params.T) { g = response[b * params.T + s - start]; }
  sequence[i] = g;
}
