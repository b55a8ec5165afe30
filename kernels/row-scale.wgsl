// row-scale: values[b, t] ·= scale[b] in place over [B, T] (the reward mask zeroing whole trajectories).
// v1: one element per lane, 256 lanes, workgroups folded into y past 65535.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.B * params.T) { return; }
  values[i] = values[i] * scale[i / params.T];
}
