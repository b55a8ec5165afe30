// attention backward, pass 1: dq = scale · Σ_j P∘(dP − D) k_j per query, written with q's strides/offset.
// P = exp2(s − lse·log2 e) is recomputed from the forward's lse; dP = dOut·v_j; stats from the delta pass.
// Workgroup (query block, h, b), BLOCK lanes = queries; key tiles of TILE rows staged in workgroup memory
// (broadcast reads), tiles past the causal limit of the block's last query skipped. No atomics: each dq
// element has one writer.

override BLOCK: u32;

var<workgroup> kvTile: array<vec4<f32>, 2u * TILE * HS4>;
var<workgroup> maskTile: array<u32, TILE>;

fn storeDq(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  dq[d] = x.x;
  if (4u * d4 + 1u < HS) { dq[d + 1u] = x.y; }
  if (4u * d4 + 2u < HS) { dq[d + 2u] = x.z; }
  if (4u * d4 + 3u < HS) { dq[d + 3u] = x.w; }
}

fn loadDOut(base: u32, d4: u32) -> vec4<f32> {
  let d = base + 4u * d4;
  if (4u * d4 + 4u <= HS) { return vec4<f32>(dOut[d], dOut[d + 1u], dOut[d + 2u], dOut[d + 3u]); }
  let n = HS - 4u * d4;
  return vec4<f32>(dOut[d], select(0.0, dOut[d + 1u], n > 1u), select(0.0, dOut[d + 2u], n > 2u), 0.0);
}

@compute @workgroup_size(BLOCK)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let b = wid.z;
  let h = wid.y;
  let g = kvGroup(h);
  let t = wid.x * BLOCK + lane;
  let valid = t < params.Tq;
  let tc = min(t, params.Tq - 1u);
  let position = params.queryStart + t;
  let keyEnd = min(params.Tk, params.queryStart + min(wid.x * BLOCK + BLOCK, params.Tq));

  var qs: array<vec4<f32>, HS4>;
  var dO: array<vec4<f32>, HS4>;
  var acc: array<vec4<f32>, HS4>;
  let qScale = params.scale * LOG2E;
  let outBase = (b * params.Tq + tc) * params.NH * HS + h * HS;
  for (var d4 = 0u; d4 < headVec4s(); d4++) {
    qs[d4] = loadQ(qBase(b, tc, h), d4) * qScale;
    dO[d4] = loadDOut(outBase, d4);
    acc[d4] = vec4<f32>(0.0);
  }
  let rowStats = stats[(b * params.NH + h) * params.Tq + tc];

  for (var j0 = 0u; j0 < keyEnd; j0 += TILE) {
    workgroupBarrier();
    for (var i = lane; i < TILE * HS4; i += BLOCK) {
      let j = j0 + i / HS4;
      let d4 = i % HS4;
      var kx = vec4<f32>(0.0);
      var vx = vec4<f32>(0.0);
      if (j < keyEnd) {
        kx = loadK(kBase(b, j, g), d4);
        vx = loadV(vBase(b, j, g), d4);
      }
      kvTile[i] = kx;
      kvTile[TILE * HS4 + i] = vx;
    }
    for (var jj = lane; jj < TILE; jj += BLOCK) {
      let j = j0 + jj;
      maskTile[jj] = select(0u, 1u, j < keyEnd && keyVisible(b, j));
    }
    workgroupBarrier();
    let keys = min(TILE, keyEnd - j0);
    for (var jj = 0u; jj < keys; jj++) {
      let j = j0 + jj;
      if (valid && j <= position && maskTile[jj] == 1u) {
        var score = vec4<f32>(0.0);
        var dp = vec4<f32>(0.0);
        for (var d4 = 0u; d4 < headVec4s(); d4++) {
          score = fma(qs[d4], kvTile[jj * HS4 + d4], score);
          dp = fma(dO[d4], kvTile[(TILE + jj) * HS4 + d4], dp);
        }
        let p = exp2(sum4(score) - rowStats.x);
        let dScore = p * (sum4(dp) - rowStats.y);
        for (var d4 = 0u; d4 < headVec4s(); d4++) { acc[d4] = fma(vec4<f32>(dScore), kvTile[jj * HS4 + d4], acc[d4]); }
      }
    }
  }

  if (valid) {
    for (var d4 = 0u; d4 < headVec4s(); d4++) { storeDq(qBase(b, t, h), d4, acc[d4] * params.scale); }
  }
}
