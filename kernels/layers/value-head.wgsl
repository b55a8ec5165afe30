// value-head: the critic's head, HF *ForTokenClassification with num_labels = 1, over rows = B*T.
//   forward:  values[n] = hidden[n, :]·weight + bias[0]           hidden (N, C), weight (C), bias (1), values (N)
//   backward: dHidden[n, c] = dValues[n]·weight[c]  (overwrite)
//             dWeight[c] += Σ_n dValues[n]·hidden[n, c];  dBias[0] += Σ_n dValues[n]
// Loads are vecN along C (vec4 when C % 4 == 0). Two variants, differing in who covers a row (as rmsnorm's):
// v1 workgroup-per-row (GPUs): a 64-lane workgroup per row, strided loads, fixed-order tree sum.
// v2 lane-per-row (lavapipe, where each workgroup and each barrier is costly): one lane walks a whole row, 64 rows
//    per workgroup, no barriers.
// Backward, one dispatch: the first ceil(C / VW / 16) workgroups each own 16 vecN columns of dWeight, summed
//    over 4 row slices and reduced in a fixed order (the first also sums dBias); the rest write dHidden rows as
//    their variant covers the forward's.

// workgroupSum comes from workgroup-sum.wgsl.
const WG = 64u;

//// forward-workgroup-per-row
@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  var dotSum = 0.0;
  for (var j = lane; j < n; j += WG) { dotSum += hsum(hidden[row * n + j] * weight[j]); }
  let value = workgroupSum(lane, dotSum) + bias[0];
  if (lane == 0u) { values[row] = value; }
}

//// forward-lane-per-row
@compute @workgroup_size(WG)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = gid.x + gid.y * nwg.x * WG;
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  var dotSum = vecN(0.0);
  for (var j = 0u; j < n; j++) { dotSum += hidden[row * n + j] * weight[j]; }
  values[row] = hsum(dotSum) + bias[0];
}

//// backward
// The dWeight half is column-grad.wgsl's weightGradTile: dWeight[c] += Σ_n dValues[n]·hidden[n, c].
fn columnTerm(row: u32, at: u32) -> vecN {
  return dValues[row] * hidden[at];
}

fn writeColumnGrad(col: u32, sum: vecN) {
  dWeight[col] += sum;
}

fn biasGrad(lane: u32) {
  var biasSum = 0.0;
  for (var row = lane; row < params.rows; row += WG) { biasSum += dValues[row]; }
  let total = workgroupSum(lane, biasSum);
  if (lane == 0u) { dBias[0] += total; }
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let id = wid.x + wid.y * nwg.x;
  if (id < columnTiles()) {
    weightGradTile(id, lane);
    if (id == 0u) { biasGrad(lane); }
  } else {
    hiddenGrad(id - columnTiles(), lane);
  }
}

//// backward-workgroup-per-row
fn hiddenGrad(row: u32, lane: u32) {
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  let d = dValues[row];
  for (var j = lane; j < n; j += WG) { dHidden[row * n + j] = d * weight[j]; }
}

//// backward-lane-per-row
fn hiddenGrad(group: u32, lane: u32) {
  let row = group * WG + lane;
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  let d = dValues[row];
  for (var j = 0u; j < n; j++) { dHidden[row * n + j] = d * weight[j]; }
}
