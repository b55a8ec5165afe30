// value-head: the critic's head, HF *ForTokenClassification with num_labels = 1, over rows = B*T.
//   forward:  values[n] = hidden[n, :]·weight + bias[0]           hidden (N, C), weight (C), bias (1), values (N)
//   backward: dHidden[n, c] = dValues[n]·weight[c]  (overwrite)
//             dWeight[c] += Σ_n dValues[n]·hidden[n, c];  dBias[0] += Σ_n dValues[n]
// v1 forward: one 64-lane workgroup per row, vecN loads (vec4 when C % 4 == 0), fixed-order tree sum.
// v1 backward, one dispatch: the first ceil(C / VW / 16) workgroups each own 16 vecN columns of dWeight, summed
//    over 4 row slices and reduced in a fixed order (the first also sums dBias); the rest write one dHidden row each.

// workgroupSum comes from workgroup-sum.wgsl.
const WG = 64u;

//// forward
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

fn hiddenGradRow(row: u32, lane: u32) {
  let n = params.cols / VW;
  let d = dValues[row];
  for (var j = lane; j < n; j += WG) { dHidden[row * n + j] = d * weight[j]; }
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let id = wid.x + wid.y * nwg.x;
  let tiles = (params.cols / VW + TILE_COLS - 1u) / TILE_COLS;
  if (id < tiles) {
    weightGradTile(id, lane);
  } else if (id < tiles + params.rows) {
    hiddenGradRow(id - tiles, lane);
  }
}
