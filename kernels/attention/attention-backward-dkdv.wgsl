// attention backward, pass 2: per key j of group g, dv_j = Σ P dOut and dk_j = scale · Σ P∘(dP − D) q over the
// queries of ALL NH/NKV heads that read group g (so each dk/dv element has one writer: no atomics), written with
// k's and v's strides/offsets. Masked keys and keys past Tk get zero gradients.
// Workgroup (key block, g, b), BLOCK row lanes = keys (× L lanes each, attention.wgsl); query tiles of TILE rows
// (q, dOut, stats) staged in workgroup memory (broadcast reads), starting at the first query that can see the
// block's first key.
// Why this is fast on a GPU: as the dq pass (scores recomputed per tile, no T×T memory, a staged vec4 per 4 FMAs,
// each query tile loaded once per block of 64 keys); L = 2 or 4 from HS = 64 up keeps a lane's k, v, dk and dv
// rows at 4·D4 <= 32 vec4s (at HS = 128 with one lane a key they were 512 floats, spilled on any GPU).
// storeDk/storeDv come from attention-backward-dkdv-store.wgsl, or -store-fused.wgsl when dk and dv are one
// buffer (WebGPU forbids two writable bindings of the same buffer in one dispatch).

override BLOCK: u32;

// q rows then dOut rows of the current query tile.
var<workgroup> rowTile: array<vec4<f32>, 2u * TILE * HS4>;
var<workgroup> statsTile: array<vec2<f32>, TILE>;

@compute @workgroup_size(BLOCK * L)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let lanes = BLOCK * L;
  let lane = index / L;
  let part = index % L;
  let b = wid.z;
  let g = wid.y;
  let heads = params.NH / params.NKV;
  let j = wid.x * BLOCK + lane;
  let jc = min(j, params.Tk - 1u);
  let live = j < params.Tk && keyVisible(b, jc);
  // Query t sees key j iff queryStart + t >= j: earlier query tiles see nothing of this key block.
  let firstKey = wid.x * BLOCK;
  let tStart = select(0u, firstKey - params.queryStart, firstKey > params.queryStart);

  var ks: array<vec4<f32>, D4>;
  var vs: array<vec4<f32>, D4>;
  var dkAcc: array<vec4<f32>, D4>;
  var dvAcc: array<vec4<f32>, D4>;
  let kScale = params.scale * LOG2E;
  for (var i = 0u; i < headVec4s(); i++) {
    ks[i] = loadK(kBase(b, jc, g), part + L * i) * kScale;
    vs[i] = loadV(vBase(b, jc, g), part + L * i);
    dkAcc[i] = vec4<f32>(0.0);
    dvAcc[i] = vec4<f32>(0.0);
  }

  for (var h = g * heads; h < (g + 1u) * heads; h++) {
    for (var t0 = tStart; t0 < params.Tq; t0 += TILE) {
      workgroupBarrier();
      for (var i = index; i < TILE * HS4; i += lanes) {
        let t = t0 + i / HS4;
        let d4 = i % HS4;
        var qx = vec4<f32>(0.0);
        var ox = vec4<f32>(0.0);
        if (t < params.Tq) {
          qx = loadQ(qBase(b, t, h), d4);
          ox = loadDOut((b * params.Tq + t) * params.NH * HS + h * HS, d4);
        }
        rowTile[i] = qx;
        rowTile[TILE * HS4 + i] = ox;
      }
      for (var rr = index; rr < TILE; rr += lanes) {
        let t = t0 + rr;
        statsTile[rr] = select(vec2<f32>(0.0), stats[(b * params.NH + h) * params.Tq + min(t, params.Tq - 1u)],
            t < params.Tq);
      }
      workgroupBarrier();
      let rows = min(TILE, params.Tq - t0);
      for (var rr = 0u; rr < rows; rr++) {
        var score = vec4<f32>(0.0);
        var dp = vec4<f32>(0.0);
        for (var i = 0u; i < headVec4s(); i++) {
          score = fma(rowTile[rr * HS4 + part + L * i], ks[i], score);
          dp = fma(rowTile[(TILE + rr) * HS4 + part + L * i], vs[i], dp);
        }
        let rowScore = rowSum(sum4(score));
        let rowDp = rowSum(sum4(dp));
        if (live && j <= params.queryStart + t0 + rr) {
          let rowStats = statsTile[rr];
          let p = exp2(rowScore - rowStats.x);
          let dScore = p * (rowDp - rowStats.y);
          for (var i = 0u; i < headVec4s(); i++) {
            dvAcc[i] = fma(vec4<f32>(p), rowTile[(TILE + rr) * HS4 + part + L * i], dvAcc[i]);
            dkAcc[i] = fma(vec4<f32>(dScore), rowTile[rr * HS4 + part + L * i], dkAcc[i]);
          }
        }
      }
    }
  }

  if (j < params.Tk) {
    for (var i = 0u; i < headVec4s(); i++) {
      storeDk(kBase(b, j, g), part + L * i, dkAcc[i] * params.scale);
      storeDv(vBase(b, j, g), part + L * i, dvAcc[i]);
    }
  }
}
