// logprob-entropy-backward: gradLogits [N, V] from per-token coefficients [N, 2] = (d loss/d logProb,
// d loss/d entropy) — the layout policy-loss writes:
//   d/dz_v = gLogProb·(1[v = label] − p_v) − gEntropy·p_v·(z_v − Σ p z).
// Needs workgroup-reduce.wgsl and softmax-stats.wgsl prepended.
// v1: one 64-lane workgroup per token: the two softmax passes, then one write pass over V.

@compute @workgroup_size(64)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n = wid.x + wid.y * 65535u;
  if (n >= params.N) { return; }
  let base = n * params.V;
  let s = softmaxStats(lid, base);
  let g = coefficients[n];
  let label = labels[n];
  for (var v = lid; v < params.V; v = v + 64u) {
    let z = logits[base + v];
    let p = exp(z - s.max) / s.sum;
    gradLogits[base + v] = g.x * (select(0.0, 1.0, v == label) - p) - g.y * p * (z - s.meanLogit);
  }
}
