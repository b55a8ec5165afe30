// attention (register) backward dq: dq = scale · Σ_j P∘(dP − D) k_j per query as in attention-backward-dq.wgsl,
// written with q's strides/offset. Workgroup (block of 16 queries, h, b); a lane owns 2 queries and walks the keys
// 8 at a time up to the block's causal limit: the 2x8 blocks dP = dOut·v and s = q·k, then dq += dS·k.

var<private> position: array<u32, ROWS>;
// (lse·log2 e, D) of each own query, from the delta pass.
var<private> rowStats: array<vec2<f32>, ROWS>;
// Own queries, their dOut rows and dq, qs[i * MAX_HS4 + d4], loaded once (a per-lane storage load is a gather).
var<private> qs: array<vec4<f32>, ROWS * MAX_HS4>;
var<private> dOuts: array<vec4<f32>, ROWS * MAX_HS4>;
var<private> acc: array<vec4<f32>, ROWS * MAX_HS4>;

fn startRow(i: u32, b: u32, h: u32, t0: u32) {
  let t = min(t0 + i * LANES, params.Tq - 1u);
  let qRow = qOffset(b, t, h);
  let dOutRow = outOffset(b, t, h);
  for (var d4 = 0u; d4 < params.hs4; d4++) {
    qs[i * MAX_HS4 + d4] = q[qRow + d4];
    dOuts[i * MAX_HS4 + d4] = dOut[dOutRow + d4];
    acc[i * MAX_HS4 + d4] = vec4<f32>(0.0);
  }
  position[i] = params.queryStart + t;
  rowStats[i] = stats[(b * params.NH + h) * params.Tq + t];
}

/** Query i's scores of keys j0 .. j0+7 → dS = P∘(dP − D), masked (left in scores). */
fn scoreGradient(i: u32, j0: u32, visible: array<vec4<bool>, 2>) {
  if (!rowActive[i]) { return; }
  let qScale = params.scale * LOG2E;
  let attends = queryAttends(visible, j0, position[i]);
  let okLo = attends[0];
  let okHi = attends[1];
  let pLo = select(vec4<f32>(0.0), exp2(scores[2u * i] * qScale - rowStats[i].x), okLo);
  let pHi = select(vec4<f32>(0.0), exp2(scores[2u * i + 1u] * qScale - rowStats[i].x), okHi);
  scores[2u * i] = pLo * (dpScores[2u * i] - rowStats[i].y);
  scores[2u * i + 1u] = pHi * (dpScores[2u * i + 1u] - rowStats[i].y);
}

fn accumulateDq(i: u32, d4: u32, u: array<vec4<f32>, 8>) {
  if (!rowActive[i]) { return; }
  let at = i * MAX_HS4 + d4;
  acc[at] += combine(&scores, i, u);
}

fn storeRow(i: u32, b: u32, h: u32, t0: u32) {
  let t = t0 + i * LANES;
  if (t >= params.Tq) { return; }
  let base = qOffset(b, t, h);
  // Overwritten, or added to under accumulate (one key window of several).
  for (var d4 = 0u; d4 < params.hs4; d4++) {
    let x = acc[i * MAX_HS4 + d4] * params.scale;
    dq[base + d4] = select(x, dq[base + d4] + x, params.accumulate != 0u);
  }
}

@compute @workgroup_size(8)
fn main(@builtin(subgroup_invocation_id) laneIndex: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  lane = laneIndex;
  let b = wid.z;
  let h = wid.y;
  let g = kvGroup(h);
  let t0 = wid.x * BLOCK + lane;
  startRow(0u, b, h, t0); startRow(1u, b, h, t0);
  let keyEnd = min(params.Tk, params.queryStart + min(wid.x * BLOCK + BLOCK, params.Tq));

  for (var j0 = 0u; j0 < keyEnd; j0 += 8u) {
    activateQueryRows(wid.x * BLOCK, j0);
    // This lane's shared row: key j0 + lane, clamped (its scores are masked).
    let j = min(j0 + lane, params.Tk - 1u);
    let vRow = kvOffset(b, j, g, params.vColOffset, params.vRowStride);
    dpScores = array<vec4<f32>, 2u * ROWS>();
    for (var d4 = 0u; d4 < params.hs4; d4++) {
      let u = shareRows(v[vRow + d4]);
      accumulateScores(&dpScores, 0u, dOuts[d4], u);
      accumulateScores(&dpScores, 1u, dOuts[MAX_HS4 + d4], u);
    }
    let kRow = kvOffset(b, j, g, params.kColOffset, params.kRowStride);
    queryKeyScores(&qs, kRow);
    let visible = sharedKeysVisible(b, j0);
    scoreGradient(0u, j0, visible); scoreGradient(1u, j0, visible);
    for (var d4 = 0u; d4 < params.hs4; d4++) {
      let u = shareRows(k[kRow + d4]);
      accumulateDq(0u, d4, u); accumulateDq(1u, d4, u);
    }
  }

  storeRow(0u, b, h, t0); storeRow(1u, b, h, t0);
}
