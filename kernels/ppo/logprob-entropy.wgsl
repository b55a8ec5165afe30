// logprob-entropy: per-token log p(label) and entropy from logits [N, V] (N = B*T tokens), verl's
// logprobs_from_logits and entropy_from_logits, and their backward. A small-vocabulary path that only the verl
// harness (tools/verl/losses.ts) and tests dispatch: the training path's LM head (lm-head) fuses all of this
// chunk by chunk for real vocabularies. Needs workgroup-reduce.wgsl prepended.
//   forward   logProb [N] = z[label] − logsumexp(z), entropy [N] = logsumexp(z) − Σ p·z.
//   backward  gradLogits [N, V] from per-token coefficients [N, 2] = (d loss/d logProb, d loss/d entropy) — the
//             layout policy-loss writes: d/dz_v = gLogProb·(1[v = label] − p_v) − gEntropy·p_v·(z_v − Σ p z).
// The shared part, softmaxStats: max, Σ e^(z−max) and the softmax-weighted mean logit of one row, by one
// 64-lane workgroup striding over V.
// v1 forward: one 64-lane workgroup per token: a max pass, then Σ e^(z−max) and Σ e^(z−max)·z (chunked over V).
// v1 backward: one 64-lane workgroup per token: the two softmax passes, then one write pass over V.

struct Softmax { max: f32, sum: f32, meanLogit: f32 }

fn softmaxStats(lid: u32, base: u32) -> Softmax {
  var localMax = -3.4e38;
  for (var v = lid; v < params.V; v = v + 64u) { localMax = max(localMax, logits[base + v]); }
  let m = workgroupMax(lid, 64u, localMax);
  var acc = vec4<f32>(0.0);
  for (var v = lid; v < params.V; v = v + 64u) {
    let z = logits[base + v];
    let e = exp(z - m);
    acc = acc + vec4<f32>(e, e * z, 0.0, 0.0);
  }
  let total = workgroupSum4(lid, 64u, acc);
  return Softmax(m, total.x, total.y / total.x);
}

//// forward
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

//// backward
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
