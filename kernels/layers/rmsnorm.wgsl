// rmsnorm: HF LlamaRMSNorm / Qwen2RMSNorm over the rows of x (rows, cols), rows = B*T, cols = C.
//   forward:  rstd[r] = 1 / sqrt(mean_c x[r, c]^2 + eps); out[r, c] = x[r, c] * rstd[r] * weight[c]
//   backward: dx[r, c] (+)= rstd * weight[c] * dOut[r, c] - rstd^3 / cols * x[r, c] * sum_c' weight*dOut*x
//             dWeight[c] (+)= sum_r dOut[r, c] * x[r, c] * rstd[r]
// Loads are vecN along cols (vec4 when cols % 4 == 0). Two variants, differing in who reduces a row:
// v1 workgroup-per-row (GPUs): a 64-lane workgroup per row, strided loads, fixed-order tree sum in shared memory.
// v2 lane-per-row (lavapipe, where each workgroup and each barrier is costly: ~9x faster there at 1024 x 128):
//    one lane walks a whole row, 64 rows per workgroup, no barriers.
// Backward, one dispatch: the first ceil(cols / VW / 16) workgroups each own 16 vecN columns of dWeight and sum
//    them over all rows in 4 row slices, reduced in a fixed order (deterministic, no atomics); the other
//    workgroups compute dx as their variant computes the forward.

// workgroupSum comes from workgroup-sum.wgsl.
const WG = 64u;

//// forward-workgroup-per-row
@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  let base = row * n;
  var sumSq = 0.0;
  for (var j = lane; j < n; j += WG) {
    let v = x[base + j];
    sumSq += hsum(v * v);
  }
  let r = inverseSqrt(workgroupSum(lane, sumSq) / f32(params.cols) + params.eps);
  for (var j = lane; j < n; j += WG) {
    out[base + j] = x[base + j] * r * weight[j];
  }
  if (lane == 0u) { rstd[row] = r; }
}

//// forward-lane-per-row
@compute @workgroup_size(WG)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = gid.x + gid.y * nwg.x * WG;
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  let base = row * n;
  var sumSq = 0.0;
  for (var j = 0u; j < n; j++) {
    let v = x[base + j];
    sumSq += hsum(v * v);
  }
  let r = inverseSqrt(sumSq / f32(params.cols) + params.eps);
  for (var j = 0u; j < n; j++) {
    out[base + j] = x[base + j] * r * weight[j];
  }
  rstd[row] = r;
}

//// backward
// The dWeight half is column-grad.wgsl's weightGradTile: dWeight[c] (+)= Σ_rows dOut·x·rstd.
fn columnTerm(row: u32, at: u32) -> vecN {
  return dOut[at] * x[at] * rstd[row];
}

fn writeColumnGrad(col: u32, sum: vecN) {
  if (params.accumulateDWeight != 0u) {
    dWeight[col] += sum;
  } else {
    dWeight[col] = sum;
  }
}

fn writeInputGrad(at: u32, g: vecN) {
  if (params.accumulateDx != 0u) {
    dx[at] += g;
  } else {
    dx[at] = g;
  }
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let id = wid.x + wid.y * nwg.x;
  if (id < columnTiles()) {
    weightGradTile(id, lane);
  } else {
    inputGrad(id - columnTiles(), lane);
  }
}

//// backward-workgroup-per-row
fn inputGrad(row: u32, lane: u32) {
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  let base = row * n;
  var dotSum = 0.0;
  for (var j = lane; j < n; j += WG) {
    dotSum += hsum(weight[j] * dOut[base + j] * x[base + j]);
  }
  let r = rstd[row];
  let coef = r * r * r * workgroupSum(lane, dotSum) / f32(params.cols);
  for (var j = lane; j < n; j += WG) {
    writeInputGrad(base + j, r * weight[j] * dOut[base + j] - coef * x[base + j]);
  }
}

//// backward-lane-per-row
fn inputGrad(group: u32, lane: u32) {
  let row = group * WG + lane;
  if (row >= params.rows) { return; }
  let n = params.cols / VW;
  let base = row * n;
  var dotSum = 0.0;
  for (var j = 0u; j < n; j++) {
    dotSum += hsum(weight[j] * dOut[base + j] * x[base + j]);
  }
  let r = rstd[row];
  let coef = r * r * r * dotSum / f32(params.cols);
  for (var j = 0u; j < n; j++) {
    writeInputGrad(base + j, r * weight[j] * dOut[base + j] - coef * x[base + j]);
  }
}
