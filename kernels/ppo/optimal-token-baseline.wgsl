// optimal-token-baseline: verl's optimal-token-baseline estimators over [B, T] with G groups as CSR
// (groupStart [G+1], groupMembers [B], groupOf [B]). Both line a group's responses up in slots k and give each slot
// one baseline; they differ in which tokens a row keeps, so in the slot its token t takes:
//   optimal_token_baseline (compact = 0): every token, token t in slot t.
//   tir_optimal_token_baseline (compact = 1): only the masked tokens, compacted: a row's k-th one in slot k, so
//     turns that tool outputs (mask 0) separate line up by how many tokens the model wrote before them, not by
//     where they sit. Its caller leaves empty rows out of their group, as verl does.
// Three pipelines:
//   rows:     one lane per row, sequential over T: returns[b,t] = G = Σ_{s≥t} rewards·mask (reward-to-go),
//             W[b,t] = Σ_{s≤t} (1 − 2·exp(oldLogProbs) + sumPiSquared)·isWeights²·mask (isWeights only if useIs),
//             slotWeights[b,k] = (G·W·mask, W·mask) of the token in slot k, (0, 0) past the row's last: the rows a
//             slot has no token of add nothing to its sums (verl pads the compacted rows with zeros).
//   baseline: one lane per (b, k): slotBaseline[b,k] = B_k = Σ G·W·mask / (Σ W·mask + ε) over the group's rows,
//             summed in row order as verl does (0 for a one-member group, and from slot tailStart[b] on:
//             handle_zero_tail, decided on the host).
//   scatter:  one lane per row, sequential over T: advantages[b,t] = (G − B_k)·mask for the token in slot k, and
//             0 (its mask) for a token not kept.
// v1: rows and scatter 64 rows a workgroup; baseline 64 slots a workgroup, workgroups folded into y.

fn kept(maskValue: f32) -> bool {
  return params.compact == 0u || maskValue != 0.0;
}

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
  var slot = base;
  for (var t = 0u; t < params.T; t = t + 1u) {
    let m = mask[base + t];
    var w = 1.0 - 2.0 * exp(oldLogProbs[base + t]) + sumPiSquared[base + t];
    if (params.useIs != 0u) { w = w * isWeights[base + t] * isWeights[base + t]; }
    cumulative = cumulative + w * m;
    if (kept(m)) {
      slotWeights[slot] = vec2<f32>(returns[base + t] * cumulative * m, cumulative * m);
      slot = slot + 1u;
    }
  }
  for (; slot < base + params.T; slot = slot + 1u) { slotWeights[slot] = vec2<f32>(0.0); }
}

//// baseline
@compute @workgroup_size(64)
fn baselineMain(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= params.B * params.T) { return; }
  let row = i / params.T;
  let k = i % params.T;
  let g = groupOf[row];
  let start = groupStart[g];
  let n = groupStart[g + 1u] - start;
  var baseline = 0.0;
  if (n > 1u && k < tailStart[row]) {
    var sums = vec2<f32>(0.0);
    for (var m = 0u; m < n; m = m + 1u) {
      sums = sums + slotWeights[groupMembers[start + m] * params.T + k];
    }
    baseline = sums.x / (sums.y + params.epsilon);
  }
  slotBaseline[i] = baseline;
}

//// scatter
@compute @workgroup_size(64)
fn scatterMain(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= params.B) { return; }
  let base = row * params.T;
  var slot = base;
  for (var t = 0u; t < params.T; t = t + 1u) {
    let m = mask[base + t];
    var advantage = 0.0;
    if (kept(m)) {
      advantage = (returns[base + t] - slotBaseline[slot]) * m;
      slot = slot + 1u;
    }
    advantages[base + t] = advantage;
  }
}
