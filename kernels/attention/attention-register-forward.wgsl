// attention (register) forward: out [B*Tq, NH*HS], lse [B, NH, Tq] as in attention-forward.wgsl. Workgroup (block
// of 16 queries, h, b); a lane owns 2 queries and walks the keys 8 at a time up to the block's causal limit: the
// 2x8 score block, one online-softmax step per query for all 8 keys (one rescale of its output per 8 keys, not per
// key), then o += p·v.

var<private> m: array<f32, ROWS>;
var<private> l: array<f32, ROWS>;
var<private> correction: array<f32, ROWS>;
var<private> position: array<u32, ROWS>;
// Own queries and their outputs, qs[i * MAX_HS4 + d4], loaded once (a per-lane storage load is a gather on CPUs).
var<private> qs: array<vec4<f32>, ROWS * MAX_HS4>;
var<private> o: array<vec4<f32>, ROWS * MAX_HS4>;

fn startRow(i: u32, b: u32, h: u32, t0: u32) {
  let t = min(t0 + i * LANES, params.Tq - 1u);
  let base = qOffset(b, t, h);
  for (var d4 = 0u; d4 < params.hs4; d4++) {
    qs[i * MAX_HS4 + d4] = q[base + d4];
    o[i * MAX_HS4 + d4] = vec4<f32>(0.0);
  }
  position[i] = params.queryStart + t;
  m[i] = NEG_BIG;
  l[i] = 0.0;
}

/** Query i's scores of keys j0 .. j0+7 → their probabilities under the new running max, and its rescale. */
fn softmaxStep(i: u32, j0: u32, visible: array<vec4<bool>, 2>) {
  if (!rowActive[i]) { return; }
  let qScale = params.scale * LOG2E;
  let attends = queryAttends(visible, j0, position[i]);
  let okLo = attends[0];
  let okHi = attends[1];
  let sLo = select(vec4<f32>(NEG_BIG), scores[2u * i] * qScale, okLo);
  let sHi = select(vec4<f32>(NEG_BIG), scores[2u * i + 1u] * qScale, okHi);
  let top = max(sLo, sHi);
  let mNew = max(m[i], max(max(top.x, top.y), max(top.z, top.w)));
  let pLo = select(vec4<f32>(0.0), exp2(sLo - mNew), okLo);
  let pHi = select(vec4<f32>(0.0), exp2(sHi - mNew), okHi);
  scores[2u * i] = pLo;
  scores[2u * i + 1u] = pHi;
  correction[i] = exp2(m[i] - mNew);
  l[i] = l[i] * correction[i] + dot(pLo + pHi, vec4<f32>(1.0));
  m[i] = mNew;
}

fn accumulateOutput(i: u32, d4: u32, u: array<vec4<f32>, 8>) {
  if (!rowActive[i]) { return; }
  let at = i * MAX_HS4 + d4;
  o[at] = o[at] * correction[i] + combine(&scores, i, u);
}

fn storeRow(i: u32, b: u32, h: u32, t0: u32) {
  let t = t0 + i * LANES;
  if (t >= params.Tq) { return; }
  let inverse = select(0.0, 1.0 / l[i], l[i] > 0.0);
  let base = outOffset(b, t, h);
  for (var d4 = 0u; d4 < params.hs4; d4++) { out[base + d4] = o[i * MAX_HS4 + d4] * inverse; }
  lse[(b * params.NH + h) * params.Tq + t] = select(0.0, (m[i] + log2(l[i])) / LOG2E, l[i] > 0.0);
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
    queryKeyScores(&qs, kvOffset(b, j, g, params.kColOffset, params.kRowStride));
    let visible = sharedKeysVisible(b, j0);
    softmaxStep(0u, j0, visible); softmaxStep(1u, j0, visible);
    let vRow = kvOffset(b, j, g, params.vColOffset, params.vRowStride);
    for (var d4 = 0u; d4 < params.hs4; d4++) {
      let u = shareRows(v[vRow + d4]);
      accumulateOutput(0u, d4, u); accumulateOutput(1u, d4, u);
    }
  }

  storeRow(0u, b, h, t0); storeRow(1u, b, h, t0);
}
