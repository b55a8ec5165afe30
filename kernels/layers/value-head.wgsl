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
const TILE_COLS = 16u;
const SLICES = WG / TILE_COLS;

var<workgroup> columnPartial: array<vecN, WG>;

fn weightGradTile(tile: u32, lane: u32) {
  let n = params.cols / VW;
  let col = tile * TILE_COLS + lane % TILE_COLS;
  let slice = lane / TILE_COLS;
  var acc = vecN(0.0);
  if (col < n) {
    for (var row = slice; row < params.rows; row += SLICES) { acc += dValues[row] * hidden[row * n + col]; }
  }
  columnPartial[lane] = acc;
  workgroupBarrier();
  if (slice == 0u && col < n) {
    var sum = columnPartial[lane];
    for (var s = 1u; s < SLICES; s++) { sum += columnPartial[lane + s * TILE_COLS]; }
    dWeight[col] += sum;
  }
  if (tile == 0u) {
    var biasSum = 0.0;
    for (var row = lane; row < params.rows; row += WG) { biasSum += dValues[row]; }
    let total = workgroupSum(lane, biasSum);
    if (lane == 0u) { dBias[0] += total; }
  }
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let id = wid.x + wid.y * nwg.x;
  let tiles = (params.cols / VW + TILE_COLS - 1u) / TILE_COLS;
  if (id < tiles) {
    weightGradTile(id, lane);
  } else {
    hiddenGrad(id - tiles, lane);
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
