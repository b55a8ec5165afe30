// logprob-entropy: per-token log p(label) and entropy from logits [N, V] (N = B*T tokens): verl's
// logprobs_from_logits and entropy_from_logits. A small-vocabulary path (tests, verl cases); the LM head fuses
// this for real vocabularies. Needs workgroup-reduce.wgsl and softmax-stats.wgsl prepended.
// v1: one 64-lane workgroup per token: a max pass, then Σ e^(z−max) and Σ e^(z−max)·z (chunked over V).

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n = wid.x + wid.y * 65535u;
  if (n >= params.N) { return; }
  let base = n * params.V;
  let s = softmaxStats(lid, base);
  if (lid == 0u) {
    let lse = s.max + log(s.sum);
    entropy[n] = lse - s.meanLogit;
    logProb[n] = logits[base + labels[n]] - lse;
  }
}
