// attention (register) backward dk, dv: dv_j = Σ_t P·dOut_t, dk_j = scale · Σ_t P∘(dP − D) q_t per key as in
// attention-backward-dkdv.wgsl, summed over the heads of the key's kv group and written with k's and v's
// strides/offsets. Workgroup (block of 16 keys, g, b); a lane owns 2 keys and walks each head's queries 8 at a time
// from the first that sees the block: the 2x8 blocks s = k·q and dP = v·dOut, then dk += dS·q and dv += P·dOut.
// storeDk and storeDv are prepended by the launcher (one fused dk/dv binding, or two).

var<private> kRows: array<u32, ROWS>;
var<private> vRows: array<u32, ROWS>;
var<private> keyPosition: array<u32, ROWS>;
var<private> keyLive: array<bool, ROWS>;
// Own keys, values and their gradients, ks[i * MAX_HS4 + d4], loaded once (a per-lane storage load is a gather).
var<private> ks: array<vec4<f32>, ROWS * MAX_HS4>;
var<private> vs: array<vec4<f32>, ROWS * MAX_HS4>;
var<private> dkAcc: array<vec4<f32>, ROWS * MAX_HS4>;
var<private> dvAcc: array<vec4<f32>, ROWS * MAX_HS4>;

fn startKey(i: u32, b: u32, g: u32, j0: u32) {
  let j = min(j0 + i * LANES, params.Tk - 1u);
  kRows[i] = kvOffset(b, j, g, params.kColOffset, params.kRowStride);
  vRows[i] = kvOffset(b, j, g, params.vColOffset, params.vRowStride);
  for (var d4 = 0u; d4 < params.hs4; d4++) {
    ks[i * MAX_HS4 + d4] = k[kRows[i] + d4];
    vs[i * MAX_HS4 + d4] = v[vRows[i] + d4];
    dkAcc[i * MAX_HS4 + d4] = vec4<f32>(0.0);
    dvAcc[i * MAX_HS4 + d4] = vec4<f32>(0.0);
  }
  keyPosition[i] = j0 + i * LANES;
  keyLive[i] = keyVisible(b, j0 + i * LANES);
}

/** Key i's scores of queries t0 .. t0+7 → P (left in scores) and dS = P∘(dP − D) (left in dpScores), masked;
 *  lse2 and delta are the queries' (lse·log2 e, D), valid says whether each query exists (t < Tq). */
fn scoreGradient(i: u32, positions: array<vec4<u32>, 2>, valid: array<vec4<bool>, 2>, lse2: array<vec4<f32>, 2>,
                 delta: array<vec4<f32>, 2>) {
  if (!rowActive[i]) { return; }
  let qScale = params.scale * LOG2E;
  let key = vec4<u32>(keyPosition[i]);
  let live = vec4<bool>(keyLive[i]);
  let okLo = valid[0] & live & (key <= positions[0]);
  let okHi = valid[1] & live & (key <= positions[1]);
  let pLo = select(vec4<f32>(0.0), exp2(scores[2u * i] * qScale - lse2[0]), okLo);
  let pHi = select(vec4<f32>(0.0), exp2(scores[2u * i + 1u] * qScale - lse2[1]), okHi);
  scores[2u * i] = pLo;
  scores[2u * i + 1u] = pHi;
  dpScores[2u * i] = pLo * (dpScores[2u * i] - delta[0]);
  dpScores[2u * i + 1u] = pHi * (dpScores[2u * i + 1u] - delta[1]);
}

fn accumulateDk(i: u32, d4: u32, u: array<vec4<f32>, 8>) {
  if (!rowActive[i]) { return; }
  let at = i * MAX_HS4 + d4;
  dkAcc[at] += combine(&dpScores, i, u);
}

fn accumulateDv(i: u32, d4: u32, u: array<vec4<f32>, 8>) {
  if (!rowActive[i]) { return; }
  let at = i * MAX_HS4 + d4;
  dvAcc[at] += combine(&scores, i, u);
}

fn storeKey(i: u32) {
  if (keyPosition[i] >= params.Tk) { return; }
  for (var d4 = 0u; d4 < params.hs4; d4++) {
    storeDk(kRows[i] + d4, dkAcc[i * MAX_HS4 + d4] * params.scale);
    storeDv(vRows[i] + d4, dvAcc[i * MAX_HS4 + d4]);
  }
}

@compute @workgroup_size(8)
fn main(@builtin(subgroup_invocation_id) laneIndex: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  lane = laneIndex;
  let b = wid.z;
  let g = wid.y;
  let heads = params.NH / params.NKV;
  let j0 = wid.x * BLOCK + lane;
  startKey(0u, b, g, j0); startKey(1u, b, g, j0);
  // Query t sees key j iff queryStart + t >= j: queries before the block's first key see none of it.
  let firstKey = wid.x * BLOCK;
  let tStart = select(0u, firstKey - params.queryStart, firstKey > params.queryStart);

  for (var h = g * heads; h < (g + 1u) * heads; h++) {
    for (var t0 = tStart; t0 < params.Tq; t0 += 8u) {
      activateKeyRows(firstKey, t0);
      // This lane's shared row: query t0 + lane, clamped (its scores are masked).
      let t = min(t0 + lane, params.Tq - 1u);
      let qRow = qOffset(b, t, h);
      let dOutRow = outOffset(b, t, h);
      let mine = stats[(b * params.NH + h) * params.Tq + t];
      let lse2 = array<vec4<f32>, 2>(
        vec4<f32>(subgroupBroadcast(mine.x, 0u), subgroupBroadcast(mine.x, 1u), subgroupBroadcast(mine.x, 2u),
            subgroupBroadcast(mine.x, 3u)),
        vec4<f32>(subgroupBroadcast(mine.x, 4u), subgroupBroadcast(mine.x, 5u), subgroupBroadcast(mine.x, 6u),
            subgroupBroadcast(mine.x, 7u)));
      let delta = array<vec4<f32>, 2>(
        vec4<f32>(subgroupBroadcast(mine.y, 0u), subgroupBroadcast(mine.y, 1u), subgroupBroadcast(mine.y, 2u),
            subgroupBroadcast(mine.y, 3u)),
        vec4<f32>(subgroupBroadcast(mine.y, 4u), subgroupBroadcast(mine.y, 5u), subgroupBroadcast(mine.y, 6u),
            subgroupBroadcast(mine.y, 7u)));
      let tLo = vec4<u32>(t0) + vec4<u32>(0u, 1u, 2u, 3u);
      let tHi = vec4<u32>(t0) + vec4<u32>(4u, 5u, 6u, 7u);
      let valid = array<vec4<bool>, 2>(tLo < vec4<u32>(params.Tq), tHi < vec4<u32>(params.Tq));
      let positions = array<vec4<u32>, 2>(tLo + vec4<u32>(params.queryStart), tHi + vec4<u32>(params.queryStart));

      scores = array<vec4<f32>, 2u * ROWS>();
      for (var d4 = 0u; d4 < params.hs4; d4++) {
        let u = shareRows(q[qRow + d4]);
        accumulateScores(&scores, 0u, ks[d4], u);
        accumulateScores(&scores, 1u, ks[MAX_HS4 + d4], u);
      }
      dpScores = array<vec4<f32>, 2u * ROWS>();
      for (var d4 = 0u; d4 < params.hs4; d4++) {
        let u = shareRows(dOut[dOutRow + d4]);
        accumulateScores(&dpScores, 0u, vs[d4], u);
        accumulateScores(&dpScores, 1u, vs[MAX_HS4 + d4], u);
      }
      scoreGradient(0u, positions, valid, lse2, delta); scoreGradient(1u, positions, valid, lse2, delta);
      
      
      for (var d4 = 0u; d4 < params.hs4; d4++) {
        let u = shareRows(q[qRow + d4]);
        accumulateDk(0u, d4, u); accumulateDk(1u, d4, u);
      }
      for (var d4 = 0u; d4 < params.hs4; d4++) {
        let u = shareRows(dOut[dOutRow + d4]);
        accumulateDv(0u, d4, u); accumulateDv(1u, d4, u);
      }
    }
  }

  storeKey(0u); storeKey(1u);
}
