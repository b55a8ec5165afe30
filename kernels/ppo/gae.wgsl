// gae: verl's compute_gae_advantage_return scan for rewards/values/mask [B, T] (before whitening):
//   delta = r[t] + γ·next − v[t];  gae' = delta + γλ·last;  next, last carried unchanged across masked tokens;
//   advantages[b,t] = last (raw), returns[b,t] = last + v[t].
// v1: one lane per sequence, reverse loop over T (the recurrence is serial in t), 64 lanes per workgroup.

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= params.B) { return; }
  var nextValue = 0.0;
  var lastGaeLam = 0.0;
  for (var t = i32(params.T) - 1; t >= 0; t = t - 1) {
    let i = row * params.T + u32(t);
    let m = mask[i];
    let v = values[i];
    let delta = rewards[i] + params.gamma * nextValue - v;
    let gaeLam = delta + params.gamma * params.lam * lastGaeLam;
    nextValue = v * m + (1.0 - m) * nextValue;
    lastGaeLam = gaeLam * m + (1.0 - m) * lastGaeLam;
    advantages[i] = lastGaeLam;
    returns[i] = lastGaeLam + v;
  }
}
