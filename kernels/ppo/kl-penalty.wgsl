// kl-penalty: verl's KL penalty estimators (core_algos.kl_penalty) between a policy's and the reference's
// per-token log-probs. Needs kl-estimators.wgsl prepended (apply: workgroup-reduce.wgsl too). Two entry points,
// one section each (different bindings):
//   elementwise  kl[i] = kl_penalty(logprob[i], refLogprob[i]), grad[i] = d kl[i] / d logprob[i], over n = B*T
//                tokens, no masking. Not on the training path: only the verl harness (tools/verl/kl.ts) and tests.
//   apply        verl's in-reward KL (ray_trainer.apply_kl_penalty, the trainer's use_kl_in_reward) for
//                scores/logprobs/mask [B, T]: rewards[b,t] = scores[b,t] − beta·kl(old[b,t], ref[b,t])·mask[b,t],
//                rowKl[b] = masked mean of kl·mask; the controller's current_kl is the mean of rowKl over rows.
// v1 elementwise: one token per lane, 256 lanes, workgroups folded into y past 65535.
// v1 apply: one 64-lane workgroup per row (B workgroups), lanes stride over T, fixed-order tree reduction.

//// elementwise
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.n) { return; }
  let k = klEstimate(logprob[i], refLogprob[i], params.code, params.straightThrough);
  kl[i] = k.x;
  grad[i] = k.y;
}

//// apply
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
