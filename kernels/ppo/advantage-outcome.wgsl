// advantage-outcome: verl's group-baseline outcome estimators over rewards/mask [B, T] with G groups given as
// CSR (groupStart [G+1], groupMembers [B]) and groupOf [B]. Needs workgroup-reduce.wgsl prepended.
//   rowStats:  one 64-lane workgroup per row: rowStats[2b] = Σ_t rewards (unmasked, as verl), [2b+1] = Σ_t mask.
//   broadcast: one 64-lane workgroup per row: lane 0 computes the row's scalar from its group, every lane
//              writes advantages[b,t] = scalar·mask[b,t], times outputWeight and added to what advantages holds when
//              accumulate = 1 (GDPO's weighted sum of per-reward-key GRPO advantages).
// estimator: 0 grpo, 1 rloo, 2 opo, 3 reinforce_plus_plus_baseline (group mean only; whitened afterwards),
//            4 grpo_passk (only the group's first best sequence gets (max − second)/(std + ε)),
//            5 grpo_vectorized (grpo with the variance floored at varianceFloor: verl's group_mean_std; 0 at verl
//              1dda039b, ε at b178a3cd),
//            6 rloo_vectorized (rloo, but 0 for a one-member group), 7 gpg (α·(score − mean)/fNorm with
//            α = B / max(#non-zero scores in the batch, 1): lane 0 scans every row).

var<workgroup> rowScalar: f32;

@compute @workgroup_size(64)
fn rowStatsMain(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  var acc = vec4<f32>(0.0);
  for (var t = lid; t < params.T; t = t + 64u) {
    acc.x = acc.x + rewards[row * params.T + t];
    acc.y = acc.y + mask[row * params.T + t];
  }
  let total = workgroupSum4(lid, 64u, acc);
  if (lid == 0u) {
    rowStats[2u * row] = total.x;
    rowStats[2u * row + 1u] = total.y;
  }
}

fn groupScalar(row: u32) -> f32 {
  let g = groupOf[row];
  let start = groupStart[g];
  let n = groupStart[g + 1u] - start;
  let nf = f32(n);
  let score = rowStats[2u * row];
  var mean = 0.0;
  var deviation = 1.0;
  // score − mean, from scores shifted by the group's first: near-equal scores then subtract exactly (Sterbenz), so
  // a near-degenerate group's tiny spread keeps its f32 precision instead of drowning in the rounding of the mean.
  var centered = score;
  if (n > 1u) {
    let shift = rowStats[2u * groupMembers[start]];
    var sum = 0.0;
    for (var k = 0u; k < n; k = k + 1u) { sum = sum + (rowStats[2u * groupMembers[start + k]] - shift); }
    let shiftedMean = sum / nf;
    mean = shift + shiftedMean;
    centered = (score - shift) - shiftedMean;
    var squares = 0.0;
    for (var k = 0u; k < n; k = k + 1u) {
      let d = (rowStats[2u * groupMembers[start + k]] - shift) - shiftedMean;
      squares = squares + d * d;
    }
    deviation = sqrt(squares / (nf - 1.0));
  }
  switch params.estimator {
    case 5u: {
      let floored = select(1.0, sqrt(max(deviation * deviation, params.varianceFloor)), n > 1u);
      if (params.normByStd != 0u) { return centered / (floored + params.epsilon); }
      return centered;
    }
    case 6u: {
      if (n > 1u) { return (nf * score - nf * mean) / (nf - 1.0); }
      return 0.0;
    }
    case 7u: {
      let rows = arrayLength(&groupOf);
      var nonZero = 0u;
      for (var r = 0u; r < rows; r = r + 1u) {
        if (rowStats[2u * r] != 0.0) { nonZero = nonZero + 1u; }
      }
      return f32(rows) / f32(max(nonZero, 1u)) * centered / params.fNorm;
    }
    case 0u: {
      if (params.normByStd != 0u) { return centered / (deviation + params.epsilon); }
      return centered;
    }
    case 1u: {
      if (n > 1u) { return score * nf / (nf - 1.0) - mean * nf / (nf - 1.0); }
      return score;
    }
    case 2u: {
      if (n < 2u) { return score; }
      var weighted = 0.0;
      var lengths = 0.0;
      for (var k = 0u; k < n; k = k + 1u) {
        let member = groupMembers[start + k];
        weighted = weighted + rowStats[2u * member + 1u] * rowStats[2u * member];
        lengths = lengths + rowStats[2u * member + 1u];
      }
      return score - weighted / lengths;
    }
    case 3u: { return centered; }
    default: {
      var best = groupMembers[start];
      for (var k = 1u; k < n; k = k + 1u) {
        let member = groupMembers[start + k];
        if (rowStats[2u * member] > rowStats[2u * best]) { best = member; }
      }
      if (best != row) { return 0.0; }
      var second = -3.4e38;
      for (var k = 0u; k < n; k = k + 1u) {
        let member = groupMembers[start + k];
        if (member != best) { second = max(second, rowStats[2u * member]); }
      }
      if (params.normByStd != 0u) { return (score - second) / (deviation + params.epsilon); }
      return score - second;
    }
  }
}

@compute @workgroup_size(64)
fn broadcast(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  if (lid == 0u) { rowScalar = groupScalar(row); }
  workgroupBarrier();
  let scalar = rowScalar;
  for (var t = lid; t < params.T; t = t + 64u) {
    let i = row * params.T + t;
    let previous = select(0.0, advantages[i], params.accumulate != 0u);
    advantages[i] = previous + params.outputWeight * (scalar * mask[i]);
  }
}
