// kl-penalty: kl[i] = kl_penalty(logprob[i], refLogprob[i]) and grad[i] = d kl[i] / d logprob[i], elementwise
// over n = B*T tokens (verl's kl_penalty; no masking). Needs kl-estimators.wgsl prepended.
// v1: one token per lane, 256 lanes, workgroups folded into y past 65535.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.n) { return; }
  let k = klEstimate(logprob[i], refLogprob[i], params.code, params.straightThrough);
  kl[i] = k.x;
  grad[i] = k.y;
}
