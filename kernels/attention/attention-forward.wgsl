// attention forward: out [B*Tq, NH*HS] = softmax(scale·q·kᵀ over allowed keys)·v, lse [B, NH, Tq] (natural log;
// 0 with out = 0 for a query that sees no key). Workgroup (query block, h, b) of BLOCK row lanes (× L lanes each,
// attention.wgsl): params.blockRows queries × params.keySplit row lanes each, lanes past that idle (uniforms, not
// constants: one pipeline per head size serves every Tq, where each split was a pipeline of its own to compile).
// Key tiles of TILE rows are staged in workgroup memory; row lane (r, s) takes keys s, s+keySplit, ... of each tile
// with its own online softmax, and the keySplit partial states of a query are merged by a tree in workgroup memory
// at the end.
// v1 (training, prefill): blockRows = 64, keySplit = 1: every lane reads the same key (broadcast loads).
// v1 (decode, Tq < 64): blockRows = next power of two >= Tq, keySplit = min(64 / blockRows, TILE) so the
//    lanes a single query would leave idle split Tk instead.
// Key tiles past the causal limit of the block's last query are skipped.
// Why this is fast on a GPU (L = 2 or 4 from HS = 64 up): no T×T scores anywhere (each key tile is loaded from
// global memory once per block of 64 queries, so global traffic is T/64 passes over K and V, and a query's scores
// live only in registers); the block's lanes read a staged k or v vec4 for 4 FMAs, the 8-64 lanes of a row group
// reading the same address (a broadcast); D4 <= 8 vec4s of q and of the output a lane keep registers under ~100, so
// many workgroups stay resident; two subgroup shuffles per score at L = 4.

override BLOCK: u32;

// kvTile (attention-key-tile.wgsl) is reused as the split-K merge buffer (needs TILE >= 16).
var<workgroup> mergeMax: array<f32, 32>;
var<workgroup> mergeSum: array<f32, 32>;

fn storeOut(base: u32, d4: u32, x: vec4<f32>) {
  let d = base + 4u * d4;
  out[d] = x.x;
  if (4u * d4 + 1u < HS) { out[d + 1u] = x.y; }
  if (4u * d4 + 2u < HS) { out[d + 2u] = x.z; }
  if (4u * d4 + 3u < HS) { out[d + 3u] = x.w; }
}

@compute @workgroup_size(BLOCK * L)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let lanes = BLOCK * L;
  let lane = index / L;
  let part = index % L;
  let keySplit = params.keySplit;
  let blockRows = params.blockRows;
  let b = wid.z;
  let h = wid.y;
  let g = kvGroup(h);
  let r = lane / keySplit;
  let s = lane % keySplit;
  let t = wid.x * blockRows + r;
  let valid = r < blockRows && t < params.Tq;
  let position = params.queryStart + t;
  let keyEnd = min(params.Tk, params.queryStart + min(wid.x * blockRows + blockRows, params.Tq));

  var qs: array<vec4<f32>, D4>;
  var acc: array<vec4<f32>, D4>;
  let qScale = params.scale * LOG2E;
  for (var i = 0u; i < headVec4s(); i++) {
    qs[i] = select(vec4<f32>(0.0), loadQ(qBase(b, min(t, params.Tq - 1u), h), part + L * i) * qScale, valid);
    acc[i] = vec4<f32>(0.0);
  }
  var m = NEG_BIG;
  var l = 0.0;

  for (var j0 = 0u; j0 < keyEnd; j0 += TILE) {
    workgroupBarrier();
    stageKeyTile(b, g, j0, keyEnd, index, lanes);
    workgroupBarrier();
    let keys = min(TILE, keyEnd - j0);
    // Uniform trip count (rowSum's subgroup shuffles need it): lanes past the tile's keys compute a dot they drop.
    for (var jj0 = 0u; jj0 < keys; jj0 += keySplit) {
      let jj = min(jj0 + s, TILE - 1u);
      var dot = vec4<f32>(0.0);
      for (var i = 0u; i < headVec4s(); i++) { dot = fma(qs[i], kvTile[jj * HS4 + part + L * i], dot); }
      let score = rowSum(sum4(dot));
      let j = j0 + jj;
      if (jj0 + s < keys && valid && j <= position && maskTile[jj] == 1u) {
        let mNew = max(m, score);
        let correction = exp2(m - mNew);
        let p = exp2(score - mNew);
        l = l * correction + p;
        for (var i = 0u; i < headVec4s(); i++) {
          acc[i] = fma(acc[i], vec4<f32>(correction), p * kvTile[(TILE + jj) * HS4 + part + L * i]);
        }
        m = mNew;
      }
    }
  }

  // Tree merge of the keySplit partial softmax states of each query: slot r*half + (s - half) carries row lane s.
  for (var half = keySplit / 2u; half > 0u; half /= 2u) {
    workgroupBarrier();
    if (r < blockRows && s >= half && s < 2u * half) {
      let slot = r * half + s - half;
      if (part == 0u) {
        mergeMax[slot] = m;
        mergeSum[slot] = l;
      }
      for (var i = 0u; i < headVec4s(); i++) { kvTile[slot * HS4 + part + L * i] = acc[i]; }
    }
    workgroupBarrier();
    if (r < blockRows && s < half) {
      let slot = r * half + s;
      let other = mergeMax[slot];
      let mNew = max(m, other);
      let mine = exp2(m - mNew);
      let theirs = exp2(other - mNew);
      l = l * mine + mergeSum[slot] * theirs;
      for (var i = 0u; i < headVec4s(); i++) { acc[i] = acc[i] * mine + kvTile[slot * HS4 + part + L * i] * theirs; }
      m = mNew;
    }
  }

  if (valid && s == 0u) {
    let inverse = select(0.0, 1.0 / l, l > 0.0);
    let base = (b * params.Tq + t) * params.NH * HS + h * HS;
    for (var i = 0u; i < headVec4s(); i++) { storeOut(base, part + L * i, acc[i] * inverse); }
    if (part == 0u) { lse[(b * params.NH + h) * params.Tq + t] = select(0.0, (m + log2(l)) / LOG2E, l > 0.0); }
  }
}
