// apply-kl-penalty: verl's in-reward KL (ray_trainer.apply_kl_penalty) for scores/logprobs/mask [B, T]:
//   rewards[b,t] = scores[b,t] − beta·kl(old[b,t], ref[b,t])·mask[b,t],  rowKl[b] = masked mean of kl·mask.
// The controller's current_kl is the mean of rowKl over rows. Needs workgroup-reduce.wgsl and
// kl-estimators.wgsl prepended.
// v1: one 64-lane workgroup per row (B workgroups), lanes stride over T, fixed-order tree reduction.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  var sums = vec4<f32>(0.0);
  for (var t = lid; t < params.T; t = t + 64u) {
    let i = row * params.T + t;
    let m = mask[i];
    let kld = klEstimate(oldLogProbs[i], refLogProb[i], params.code, params.straightThrough).x * m;
    rewards[i] = scores[i] - params.beta * kld;
    if (m != 0.0) { sums.x = sums.x + kld * m; }
    sums.y = sums.y + m;
  }
  let total = workgroupSum4(lid, 64u, sums);
  if (lid == 0u) { rowKl[row] = total.x / (total.y + 1e-8); }
}
