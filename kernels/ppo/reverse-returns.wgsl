// reverse-returns: return-to-go scans over rewards/mask [B, T] for the REINFORCE-family estimators.
//   reinforcePlusPlus: next = r[t] + γ·running; returns[t] = next·mask[t]; running = next where mask[t], else
//                      running carries over the mask-0 span (verl 1dda039b: tool observations keep the return of the
//                      turns after them); carryAcrossMask = 0 is verl b178a3cd's form, returns[t] = next and
//                      running = next·mask[t] (reset at every mask-0 token). advantages = returns (whitened and masked
//                      afterwards by masked-stats).
//   remax:             returns[t] = Σ_{s≥t} r[s]·mask[s]; advantages = returns − baselines[b]·mask[t].
// v1: one lane per sequence, reverse loop over T, 64 lanes per workgroup.

@compute @workgroup_size(64)
fn reinforcePlusPlus(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= params.B) { return; }
  var running = 0.0;
  for (var t = i32(params.T) - 1; t >= 0; t = t - 1) {
    let i = row * params.T + u32(t);
    let m = mask[i];
    let next = rewards[i] + params.gamma * running;
    let value = next * select(1.0, m, params.carryAcrossMask != 0u);
    returns[i] = value;
    advantages[i] = value;
    running = next * m + running * (1.0 - m) * f32(params.carryAcrossMask);
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
