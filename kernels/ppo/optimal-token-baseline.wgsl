// optimal-token-baseline: verl's optimal_token_baseline estimator (OTB) over [B, T] with G groups as CSR
// (groupStart [G+1], groupMembers [B], groupOf [B]), two pipelines:
//   rows:     one lane per row, sequential over T: returns[b,t] = Σ_{s≥t} rewards·mask (reward-to-go),
//             W[b,t] = Σ_{s≤t} (1 − 2·exp(oldLogProbs) + sumPiSquared)·isWeights²·mask (isWeights only if useIs).
//   baseline: one lane per (b, t): B_t = Σ_group returns·W·mask / (Σ_group W·mask + ε) over the row's group
//             (0 for a one-member group, and from column tailStart[b] on: handle_zero_tail, decided on the host),
//             advantages[b,t] = (returns − B_t)·mask.
// v1: rows 64 rows a workgroup; baseline 64 tokens a workgroup, workgroups folded into y.

//// rows
@compute @workgroup_size(64)
fn rowsMain(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= params.B) { return; }
  let base = row * params.T;
  var toGo = 0.0;
  for (var k = 0u; k < params.T; k = k + 1u) {
    let t = params.T - 1u - k;
    toGo = toGo + rewards[base + t] * mask[base + t];
    returns[base + t] = toGo;
  }
  var cumulative = 0.0;
  for (var t = 0u; t < params.T; t = t + 1u) {
    var w = 1.0 - 2.0 * exp(oldLogProbs[base + t]) + sumPiSquared[base + t];
    if (params.useIs != 0u) { w = w * isWeights[base + t] * isWeights[base + t]; }
    cumulative = cumulative + w * mask[base + t];
    pathWeight[base + t] = cumulative;
  }
}

//// baseline
@compute @workgroup_size(64)
fn baselineMain(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= params.B * params.T) { return; }
  let row = i / params.T;
  let t = i % params.T;
  let g = groupOf[row];
  let start = groupStart[g];
  let n = groupStart[g + 1u] - start;
  var baseline = 0.0;
  if (n > 1u && t < tailStart[row]) {
    var numerator = 0.0;
    var denominator = 0.0;
    for (var k = 0u; k < n; k = k + 1u) {
      let j = groupMembers[start + k] * params.T + t;
      numerator = numerator + returns[j] * pathWeight[j] * mask[j];
      denominator = denominator + pathWeight[j] * mask[j];
    }
    baseline = numerator / (denominator + params.epsilon);
  }
  advantages[i] = (returns[i] - baseline) * mask[i];
}
