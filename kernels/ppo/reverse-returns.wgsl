// reverse-returns: return-to-go scans over rewards/mask [B, T] for the REINFORCE-family estimators.
//   reinforcePlusPlus: running = r[t] + γ·running; returns[t] = running; running ·= mask[t] (reset after EOS);
//                      advantages = returns (whitened and masked afterwards by masked-stats).
//   remax:             returns[t] = Σ_{s≥t} r[s]·mask[s]; advantages = returns − baselines[b]·mask[t].
// v1: one lane per sequence, reverse loop over T, 64 lanes per workgroup.

@compute @workgroup_size(64)
fn reinforcePlusPlus(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= params.B) { return; }
  var running = 0.0;
  for (var t = i32(params.T) - 1; t >= 0; t = t - 1) {
    let i = row * params.T + u32(t);
    running = rewards[i] + params.gamma * running;
    returns[i] = running;
    advantages[i] = running;
    running = running * mask[i];
  }
}

@compute @workgroup_size(64)
fn remax(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= params.B) { return; }
  var running = 0.0;
  for (var t = i32(params.T) - 1; t >= 0; t = t - 1) {
    let i = row * params.T + u32(t);
    let m = mask[i];
    running = running + rewards[i] * m;
    returns[i] = running;
    advantages[i] = running - baselines[row] * m;
  }
}
