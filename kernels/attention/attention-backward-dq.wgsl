// attention backward, pass 1: dq = scale · Σ_j P∘(dP − D) k_j per query, written with q's strides/offset.
// P = exp2(s − lse·log2 e) is recomputed from the forward's lse; dP = dOut·v_j; stats from the delta pass.
// Workgroup (query block, h, b), BLOCK row lanes = queries (× L lanes each, attention.wgsl); key tiles of TILE rows
// staged in workgroup memory (broadcast reads), tiles past the causal limit of the block's last query skipped. No
// atomics: each dq element has one writer.
// Why this is fast on a GPU: P and dP are recomputed per tile in registers from q, k, v and the forward's lse (no
// T×T scores in memory); each k and v tile is loaded once per block of 64 queries; a staged vec4 feeds 4 FMAs;
// with L = 2 or 4 from HS = 64 up a lane keeps 3·D4 <= 24 vec4s (q, dOut, dq) in registers.

override BLOCK: u32;

// Overwritten, or added to under accumulate (one key window of several; select: an overwrite stores the same bits).
fn storeDq(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  let add = params.accumulate != 0u;
  dq[d] = select(x.x, dq[d] + x.x, add);
  if (4u * d4 + 1u < HS) { dq[d + 1u] = select(x.y, dq[d + 1u] + x.y, add); }
  if (4u * d4 + 2u < HS) { dq[d + 2u] = select(x.z, dq[d + 2u] + x.z, add); }
  if (4u * d4 + 3u < HS) { dq[d + 3u] = select(x.w, dq[d + 3u] + x.w, add); }
}

@compute @workgroup_size(BLOCK * L)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let lanes = BLOCK * L;
  let lane = index / L;
  let part = index % L;
  let b = wid.z;
  let h = wid.y;
  let g = kvGroup(h);
  let t = wid.x * BLOCK + lane;
  let valid = t < params.Tq;
  let tc = min(t, params.Tq - 1u);
  let position = params.queryStart + t;
  let keyEnd = min(params.Tk, params.queryStart + min(wid.x * BLOCK + BLOCK, params.Tq));

  var qs: array<vec4<f32>, D4>;
  var dO: array<vec4<f32>, D4>;
  var acc: array<vec4<f32>, D4>;
  let qScale = params.scale * LOG2E;
  let outBase = (b * params.Tq + tc) * params.NH * HS + h * HS;
  for (var i = 0u; i < headVec4s(); i++) {
    qs[i] = loadQ(qBase(b, tc, h), part + L * i) * qScale;
    dO[i] = loadDOut(outBase, part + L * i);
    acc[i] = vec4<f32>(0.0);
  }
  let rowStats = stats[(b * params.NH + h) * params.Tq + tc];

  for (var j0 = 0u; j0 < keyEnd; j0 += TILE) {
    workgroupBarrier();
    stageKeyTile(b, g, j0, keyEnd, index, lanes);
    workgroupBarrier();
    let keys = min(TILE, keyEnd - j0);
    for (var jj = 0u; jj < keys; jj++) {
      var score = vec4<f32>(0.0);
      var dp = vec4<f32>(0.0);
      for (var i = 0u; i < headVec4s(); i++) {
        score = fma(qs[i], kvTile[jj * HS4 + part + L * i], score);
        dp = fma(dO[i], kvTile[(TILE + jj) * HS4 + part + L * i], dp);
      }
      let rowScore = rowSum(sum4(score));
      let rowDp = rowSum(sum4(dp));
      let j = j0 + jj;
      if (valid && j <= position && maskTile[jj] == 1u) {
        let p = exp2(rowScore - rowStats.x);
        let dScore = p * (rowDp - rowStats.y);
        for (var i = 0u; i < headVec4s(); i++) {
          acc[i] = fma(vec4<f32>(dScore), kvTile[jj * HS4 + part + L * i], acc[i]);
        }
      }
    }
  }

  if (valid) {
    for (var i = 0u; i < headVec4s(); i++) { storeDq(qBase(b, t, h), part + L * i, acc[i] * params.scale); }
  }
}
