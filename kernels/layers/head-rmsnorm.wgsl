// head-rmsnorm: Qwen3's q_norm / k_norm, an RMSNorm over the HS values of every q and k head inside the fused
// qkv buffer (rows, (NH + 2*NKV)*HS), rows = B*T; q heads use qWeight (HS), k heads kWeight (HS), v heads pass.
//   forward:  rstd[r, h] = 1 / sqrt(mean_d qkv[r, h, d]^2 + eps); out[r, h, d] = qkv[r, h, d] * rstd[r, h] * w[d]
//             (h < NH + NKV; rstd is (rows, NH + NKV)); v heads are copied to out unchanged
//   backward: dQkv[r, h, d] = rstd * w[d] * dOut - rstd^3 / HS * qkv * sum_d' w*dOut*qkv (v heads: dOut)
//             dQWeight[d] += sum over rows and q heads of dOut * qkv * rstd; dKWeight likewise over k heads
// v1 forward: one lane per (row, head), vecN loads along HS (vec4 when HS % 4 == 0), 64 lanes per workgroup.
// v1 backward, one dispatch: the first 2*ceil(HS / VW / 8) workgroups each own 8 vecN columns of dQWeight or
//    dKWeight, summed over all rows in 8 row slices and reduced in a fixed order (deterministic, no atomics);
//    the rest take one (row, head) per lane like the forward.

const WG = 64u;

// Lanes index (row, head) pairs, row-major: pair p covers qkv[p*HS, (p+1)*HS).
fn pairCount() -> u32 {
  return params.rows * (params.NH + 2u * params.NKV);
}

//// forward
@compute @workgroup_size(WG)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let pair = gid.x + gid.y * nwg.x * WG;
  if (pair >= pairCount()) { return; }
  let heads = params.NH + 2u * params.NKV;
  let row = pair / heads;
  let head = pair % heads;
  let n = params.HS / VW;
  let base = pair * n;
  if (head >= params.NH + params.NKV) {
    for (var j = 0u; j < n; j++) { out[base + j] = qkv[base + j]; }
    return;
  }
  var sumSq = 0.0;
  for (var j = 0u; j < n; j++) {
    let v = qkv[base + j];
    sumSq += hsum(v * v);
  }
  let r = inverseSqrt(sumSq / f32(params.HS) + params.eps);
  if (head < params.NH) {
    for (var j = 0u; j < n; j++) { out[base + j] = qkv[base + j] * r * qWeight[j]; }
  } else {
    for (var j = 0u; j < n; j++) { out[base + j] = qkv[base + j] * r * kWeight[j]; }
  }
  rstd[row * (params.NH + params.NKV) + head] = r;
}

//// backward
const TILE_COLS = 8u;
const SLICES = WG / TILE_COLS;

var<workgroup> columnPartial: array<vecN, WG>;

fn weight(isQ: bool, j: u32) -> vecN {
  if (isQ) { return qWeight[j]; }
  return kWeight[j];
}

// Tiles [0, tilesPerWeight) sum dQWeight, the next tilesPerWeight dKWeight.
fn weightGradTile(tile: u32, tilesPerWeight: u32, lane: u32) {
  let n = params.HS / VW;
  let isQ = tile < tilesPerWeight;
  let firstHead = select(params.NH, 0u, isQ);
  let headCount = select(params.NKV, params.NH, isQ);
  let heads = params.NH + 2u * params.NKV;
  let col = (tile % tilesPerWeight) * TILE_COLS + lane % TILE_COLS;
  var acc = vecN(0.0);
  if (col < n) {
    for (var row = lane / TILE_COLS; row < params.rows; row += SLICES) {
      for (var h = firstHead; h < firstHead + headCount; h++) {
        let at = (row * heads + h) * n + col;
        acc += dOut[at] * qkv[at] * rstd[row * (params.NH + params.NKV) + h];
      }
    }
  }
  columnPartial[lane] = acc;
  workgroupBarrier();
  if (lane < TILE_COLS && col < n) {
    var sum = columnPartial[lane];
    for (var s = 1u; s < SLICES; s++) { sum += columnPartial[lane + s * TILE_COLS]; }
    if (isQ) { dQWeight[col] += sum; } else { dKWeight[col] += sum; }
  }
}

fn inputGradHead(pair: u32) {
  let heads = params.NH + 2u * params.NKV;
  let row = pair / heads;
  let head = pair % heads;
  let n = params.HS / VW;
  let base = pair * n;
  if (head >= params.NH + params.NKV) {
    for (var j = 0u; j < n; j++) { dQkv[base + j] = dOut[base + j]; }
    return;
  }
  let isQ = head < params.NH;
  var dotSum = 0.0;
  for (var j = 0u; j < n; j++) {
    dotSum += hsum(weight(isQ, j) * dOut[base + j] * qkv[base + j]);
  }
  let r = rstd[row * (params.NH + params.NKV) + head];
  let coef = r * r * r * dotSum / f32(params.HS);
  for (var j = 0u; j < n; j++) {
    dQkv[base + j] = r * weight(isQ, j) * dOut[base + j] - coef * qkv[base + j];
  }
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let id = wid.x + wid.y * nwg.x;
  let tilesPerWeight = (params.HS / VW + TILE_COLS - 1u) / TILE_COLS;
  if (id < 2u * tilesPerWeight) {
    weightGradTile(id, tilesPerWeight, lane);
    return;
  }
  let pair = (id - 2u * tilesPerWeight) * WG + lane;
  if (pair < pairCount()) { inputGradHead(pair); }
}
