// lm-head: the fused classifier's per-chunk kernels. Logits come in vocabulary chunks, logits (N, width) =
// hidden (N, C) · weight[v0 : v0 + width]ᵀ, written by matmul into a reused scratch; z = logits / temperature.
//   stats:   online log-sum-exp over the chunks. Per row it carries (m, s, a, zt) in rowStats (N) between chunks:
//            m the running max, s = Σ exp(z − m), a = Σ exp(z − m)·(z − m), zt = z[target]. After the last chunk:
//            lse = m + log s, logprobs = zt − lse, entropy = lse − Σ p·z = log s − a / s.
//            Keeping a relative to m (not Σ e·z) avoids cancelling large logits in the entropy.
//   dlogits: in place, logits ← dz / temperature with p = exp(z − lse),
//            dz = dLogprobs·(onehot − p) − dEntropy·p·(z − Σ p·z), Σ p·z = lse − entropy.
// Both: vecN loads (vec4 when width % 4 == 0). dlogits: one 64-lane workgroup per row. stats, two variants:
//   row-per-workgroup: 64 lanes per row, fixed-order merge tree (GPUs: coalesced loads, enough workgroups);
//   row-per-lane: one lane per row, no barriers (CPU implementations such as lavapipe, where barriers are dear).
//   place:   out[n, v0 + j] = logits[n, j] — full logits (lmHeadLogits) of a weight too large for one binding,
//            assembled chunk by chunk.
//   sum-pi-squared (only when asked, verl's calculate_sum_pi_squared): Σ_v π_v² = exp(lse(2z) − 2·lse(z)) (N),
//            verl's formula; lse(2z) comes from a second stats pass over each chunk with the inverse temperature
//            doubled (exact: scaling by 2 rounds nothing), so both variants give it and no extra matmul runs.
//            lse(2z) ≤ 2·lse(z), so the exponent is ≤ 0 and only its rounding (an ulp of 2·lse) enters.
// The launcher prepends `vecU` (u32 vector of vecN's width) and COMPONENT (each component's column offset).

const WG = 64u;

// (m, s, a, zt) of two disjoint column sets combined into those of their union.
fn mergeStats(x: vec4<f32>, y: vec4<f32>) -> vec4<f32> {
  let m = max(x.x, y.x);
  let rx = exp(x.x - m);
  let ry = exp(y.x - m);
  return vec4<f32>(m, x.y * rx + y.y * ry, rx * (x.z + x.y * (x.x - m)) + ry * (y.z + y.y * (y.x - m)), x.w + y.w);
}

// 1.0 in the component holding column `column` of the vecN starting at column `first`, else 0.0.
fn oneHot(first: u32, column: u32) -> vecN {
  return select(vecN(0.0), vecN(1.0), vecU(first) + COMPONENT == vecU(column));
}

//// stats
// (m, s, a, zt) after adding the columns [firstColumn, firstColumn + VW) with values z to `state`.
fn addColumns(state: vec4<f32>, z: vecN, firstColumn: u32, targetColumn: u32) -> vec4<f32> {
  let z4 = vec4<f32>(z);
  let zMax = max(max(z4.x, z4.y), max(z4.z, z4.w));
  var rescaled = state;
  if (zMax > state.x) {
    let r = exp(state.x - zMax);
    rescaled = vec4<f32>(zMax, state.y * r, r * (state.z + state.y * (state.x - zMax)), state.w);
  }
  let e = exp(z - rescaled.x);
  return rescaled + vec4<f32>(0.0, hsum(e), hsum(e * (z - rescaled.x)), hsum(z * oneHot(firstColumn, targetColumn)));
}

// A finite stand-in for −∞ (WGSL has no infinity literal): exp(m − z) underflows to 0 on the first column.
const EMPTY_STATS = vec4<f32>(-3.0e38, 0.0, 0.0, 0.0);

// Folds this chunk's statistics of `row` into those carried from earlier chunks; finishes the row after the last.
fn finishChunk(row: u32, chunkStats: vec4<f32>) {
  var total = chunkStats;
  if (params.first == 0u) { total = mergeStats(rowStats[row], total); }
  if (params.last == 0u) {
    rowStats[row] = total;
  } else {
    let logS = log(total.y);
    lse[row] = total.x + logS;
    logprobs[row] = total.w - (total.x + logS);
    entropy[row] = logS - total.z / total.y;
  }
}

var<workgroup> laneStats: array<vec4<f32>, WG>;
// WG / 2, the merge tree's first stride, read back through workgroup memory: a bound the shader compiler cannot
// fold keeps the tree a loop instead of six inlined levels, each a barrier (a coroutine switch on lavapipe).
var<workgroup> treeStart: u32;

// Variant row-per-workgroup: 64 lanes stride over one row, then a fixed merge tree.
@compute @workgroup_size(WG)
fn stats_row_per_workgroup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.rows) { return; }
  let n = params.width / VW;
  // Relative to this chunk; out of range (a huge u32) when the target lies in another chunk.
  let targetColumn = targets[row] - params.v0;
  var state = EMPTY_STATS;
  for (var j = lane; j < n; j += WG) {
    state = addColumns(state, logits[row * n + j] * params.invTemperature, j * VW, targetColumn);
  }
  laneStats[lane] = state;
  if (lane == 0u) { treeStart = WG / 2u; }
  // The uniform load is also the barrier that publishes the stores above.
  for (var stride = workgroupUniformLoad(&treeStart); stride > 0u; stride /= 2u) {
    if (lane < stride) { laneStats[lane] = mergeStats(laneStats[lane], laneStats[lane + stride]); }
    workgroupBarrier();
  }
  if (lane == 0u) { finishChunk(row, laneStats[0]); }
}

// Variant row-per-lane: each lane walks a whole row; no tree, no barriers (cheapest on CPU implementations).
@compute @workgroup_size(WG)
fn stats_row_per_lane(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lane: u32) {
  let row = (wid.x + wid.y * nwg.x) * WG + lane;
  if (row >= params.rows) { return; }
  let n = params.width / VW;
  let targetColumn = targets[row] - params.v0;
  var state = EMPTY_STATS;
  for (var j = 0u; j < n; j++) {
    state = addColumns(state, logits[row * n + j] * params.invTemperature, j * VW, targetColumn);
  }
  finishChunk(row, state);
}

//// dlogits
@compute @workgroup_size(WG)
fn dlogits(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.rows) { return; }
  let n = params.width / VW;
  let targetColumn = targets[row] - params.v0;
  let dLogprob = dLogprobs[row];
  let dEntropyRow = select(0.0, dEntropy[row], params.useEntropy == 1u);
  let rowLse = lse[row];
  let expectedZ = rowLse - entropy[row];
  // Padding rows carry no gradient; writing zeros keeps whatever their lse holds from leaking in as NaN.
  let hasGradient = dLogprob != 0.0 || dEntropyRow != 0.0;
  for (var j = lane; j < n; j += WG) {
    let z = logits[row * n + j] * params.invTemperature;
    let p = exp(z - rowLse);
    let dz = dLogprob * (oneHot(j * VW, targetColumn) - p) - dEntropyRow * p * (z - expectedZ);
    logits[row * n + j] = select(vecN(0.0), dz * params.invTemperature, hasGradient);
  }
}

//// place
@compute @workgroup_size(256)
fn place(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * 256u;
  if (idx >= params.rows * params.width) { return; }
  let row = idx / params.width;
  out[row * params.V + params.v0 + idx % params.width] = logits[idx];
}

//// sum-pi-squared
@compute @workgroup_size(256)
fn sum_pi_squared(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = gid.x + gid.y * nwg.x * 256u;
  if (row >= params.rows) { return; }
  sumPiSquared[row] = exp(lseDoubled[row] - 2.0 * lse[row]);
}
