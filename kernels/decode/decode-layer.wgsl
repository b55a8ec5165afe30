// decode-layer: one decoder layer of a decode step (one new token per sequence) in one dispatch, for CPU devices:
//   x (B, C) += o_proj(attention(rope(qk_norm(qkv_proj(rmsnorm(x))))), the new k and v written to the cache at
//   `slot`; then x += down_proj(swiglu(gate_up_proj(rmsnorm(x)))).
// The weights are the transposed float32 copies (K, N) (qkvW (C, W), oW (NH·HS, C), gateUpW (C, 2I) with the gate
// columns first, downW (I, C)), as the separate decode matmuls read them (nn).
// v1 (the only one): one workgroup of 8 lanes, one 256-bit SIMD vector on lavapipe (which runs larger workgroups as
// coroutines switched at every barrier), owns ROWS sequences and runs the whole layer for them, with barriers
// between stages and the activations in workgroup memory. Rows are independent through a layer, so nothing
// crosses workgroups. Against the 5 dispatches per layer of the separate path, the price is that every workgroup
// streams every weight: ROWS is 4 (two workgroups for a decode batch of 8 on two cores). The tiny model's decode
// step is 7 dispatches instead of 23.
// Projections: a lane owns output vec4 chunks n and n + 8 (gate_up: gate chunk n and its up chunk n + I/4), the
// weights are read as vec4s along n, 8 accumulators. The 4 rows' inputs (vec4s along k in workgroup memory) are
// loaded 8 steps of k at a time, a step a lane, and handed round by subgroupShuffle: lavapipe loads per lane even
// where every lane reads one address (tiny model's generation 3-8% more tokens/s, CPU time per step 3% less,
// alternated runs; an unrolled subgroupBroadcast took 41 s to compile).
// Heads (q/k norm, RoPE, cache write) and attention: lane d holds chunk d of a head vector (HS <= 32), as
// decode-attention-dims.wgsl: a score is a subgroupAdd, RoPE's rotate-half partner a subgroupShuffle. Query heads
// of one kv head attend in pairs (each cached k, v loaded once for two), and the key mask comes 8 slots a load,
// as ballot bits (tiny model's decode, same process: ~10% more tokens/s each, against a head at a time and a mask
// load per key).
// Shapes and the optional parts (qkNorm, qkvBias, oBias: 0 or 1) are uniforms: one pipeline, whose cold
// compile is ~7 s on lavapipe, serves every model.

const LANES: u32 = 8u;
const ROWS: u32 = 4u;
// A finite "minus infinity": exp of differences stays NaN-free before the first unmasked key.
const NEG_BIG: f32 = -1.0e30;

var<workgroup> mem: array<vec4<f32>, MEM4>;
// The current projection pass's 4 rows x 2 chunks.
var<private> acc: array<vec4<f32>, 8>;

// Workgroup memory, in vec4s: the residual rows, the normed rows, the qkv rows (later the swiglu activations) and
// the attention output rows, ROWS of each.
struct Layout {
  C4: u32,
  QS: u32, // qkv/act row stride: max(W, I) / 4
  A4: u32, // NH·HS / 4
  x: u32,
  normed: u32,
  qkv: u32,
  att: u32,
}

fn regions() -> Layout {
  let C4 = params.C / 4u;
  let W4 = (params.NH + 2u * params.NKV) * params.HS / 4u;
  let QS = max(W4, params.I / 4u);
  let A4 = params.NH * params.HS / 4u;
  return Layout(C4, QS, A4, 0u, ROWS * C4, 2u * ROWS * C4, 2u * ROWS * C4 + ROWS * QS);
}

// The sequence of row r of this workgroup, clamped to the last one (a partial group computes copies it drops).
fn sequence(b0: u32, r: u32) -> u32 { return min(b0 + r, params.B - 1u); }

// mem[normed + r] = rmsnorm(mem[x + r]) with the input (first) or the post-attention norm weight.
fn normRows(L: Layout, lane: u32, first: bool) {
  for (var r = 0u; r < ROWS; r++) {
    var squares = 0.0;
    for (var j = lane; j < L.C4; j += LANES) {
      let v = mem[L.x + r * L.C4 + j];
      squares += dot(v, v);
    }
    let rstd = inverseSqrt(subgroupAdd(squares) / f32(params.C) + params.eps);
    for (var j = lane; j < L.C4; j += LANES) {
      var w: vec4<f32>;
      if (first) { w = inNorm[j]; } else { w = postNorm[j]; }
      mem[L.normed + r * L.C4 + j] = mem[L.x + r * L.C4 + j] * rstd * w;
    }
  }
}

//// projection (instantiated per weight binding WEIGHT; PAIRED_WEIGHT: chunk n pairs with n + outN4)
// acc for output chunks n0, n1 of the 4 rows at inAt (stride inStride) times WEIGHT (K, rowStride4 vec4s).
fn project_WEIGHT(lane: u32, base: u32, inAt: u32, inStride: u32, K4: u32, rowStride4: u32, outN4: u32) -> vec2<u32> {
  let n0 = base + lane;
  let n1 = select(n0 + LANES, n0 + outN4, PAIRED_WEIGHT);
  let c0 = min(n0, outN4 - 1u);
  let c1 = select(min(n1, outN4 - 1u), c0 + outN4, PAIRED_WEIGHT);
  acc = array<vec4<f32>, 8>();
  for (var kb = 0u; kb < K4; kb += LANES) {
    // The 4 rows' inputs for 8 steps of k4, one step a lane, then handed round by subgroupShuffle.
    let mine = min(kb + lane, K4 - 1u);
    let m0 = mem[inAt + mine];
    let m1 = mem[inAt + inStride + mine];
    let m2 = mem[inAt + 2u * inStride + mine];
    let m3 = mem[inAt + 3u * inStride + mine];
    for (var i = 0u; i < min(LANES, K4 - kb); i++) {
      let k4 = kb + i;
      let a0 = subgroupShuffle(m0, i);
      let a1 = subgroupShuffle(m1, i);
      let a2 = subgroupShuffle(m2, i);
      let a3 = subgroupShuffle(m3, i);
      let at = 4u * k4 * rowStride4;
      accumulate_WEIGHT(at + c0, at + c1, a0.x, a1.x, a2.x, a3.x);
      accumulate_WEIGHT(at + rowStride4 + c0, at + rowStride4 + c1, a0.y, a1.y, a2.y, a3.y);
      accumulate_WEIGHT(at + 2u * rowStride4 + c0, at + 2u * rowStride4 + c1, a0.z, a1.z, a2.z, a3.z);
      accumulate_WEIGHT(at + 3u * rowStride4 + c0, at + 3u * rowStride4 + c1, a0.w, a1.w, a2.w, a3.w);
    }
  }
  return vec2<u32>(n0, n1);
}

fn accumulate_WEIGHT(at0: u32, at1: u32, x0: f32, x1: f32, x2: f32, x3: f32) {
  let w0 = WEIGHT[at0];
  let w1 = WEIGHT[at1];
  acc[0] += x0 * w0;
  acc[1] += x0 * w1;
  acc[2] += x1 * w0;
  acc[3] += x1 * w1;
  acc[4] += x2 * w0;
  acc[5] += x2 * w1;
  acc[6] += x3 * w0;
  acc[7] += x3 * w1;
}
//// end of projection

// Row r's qkv chunks n0, n1 (+ bias) into mem[qkv + r].
fn storeQkv(L: Layout, r: u32, n: vec2<u32>, W4: u32, v0: vec4<f32>, v1: vec4<f32>) {
  var b0 = vec4<f32>(0.0);
  var b1 = vec4<f32>(0.0);
  if (params.qkvBias != 0u) {
    b0 = qkvBias[min(n.x, W4 - 1u)];
    b1 = qkvBias[min(n.y, W4 - 1u)];
  }
  if (n.x < W4) { mem[L.qkv + r * L.QS + n.x] = v0 + b0; }
  if (n.y < W4) { mem[L.qkv + r * L.QS + n.y] = v1 + b1; }
}

// Row r's residual chunks n0, n1 += v0, v1 (+ o_proj's bias).
fn addToResidual(L: Layout, r: u32, n: vec2<u32>, bias: bool, v0: vec4<f32>, v1: vec4<f32>) {
  var b0 = vec4<f32>(0.0);
  var b1 = vec4<f32>(0.0);
  if (params.oBias != 0u && bias) {
    b0 = oBias[min(n.x, L.C4 - 1u)];
    b1 = oBias[min(n.y, L.C4 - 1u)];
  }
  if (n.x < L.C4) { mem[L.x + r * L.C4 + n.x] += v0 + b0; }
  if (n.y < L.C4) { mem[L.x + r * L.C4 + n.y] += v1 + b1; }
}

// Row r's activation chunk n0 = silu(gate) · up into mem[qkv + r] (the qkv rows are spent by then).
fn storeAct(L: Layout, r: u32, n: u32, I4: u32, gate: vec4<f32>, up: vec4<f32>) {
  if (n < I4) { mem[L.qkv + r * L.QS + n] = gate / (1.0 + exp(-gate)) * up; }
}

// Qwen3's q/k norm, RoPE and the scale on q, in place in mem[qkv]; the new k and v into the caches at `slot`.
fn prepareHeads(L: Layout, lane: u32, b0: u32) {
  let HS4 = params.HS / 4u;
  let half4 = HS4 / 2u;
  let live = lane < HS4;
  let d4 = min(lane, HS4 - 1u);
  let partner = select(d4 - half4, d4 + half4, d4 < half4);
  let slotStride = params.NKV * HS4;
  for (var r = 0u; r < ROWS; r++) {
    let b = sequence(b0, r);
    let store = live && b0 + r < params.B;
    let angle = reduceAngle(f32(positions[b]) * invFreq[d4 % half4]);
    let c = cos(angle);
    let s = sin(angle);
    let cacheAt = (b * params.capacity + params.slot) * slotStride + d4;
    for (var h = 0u; h < params.NH + params.NKV; h++) {
      let at = L.qkv + r * L.QS + h * HS4 + d4;
      var v = mem[at];
      if (params.qkNorm != 0u) {
        let rstd = inverseSqrt(subgroupAdd(select(0.0, dot(v, v), live)) / f32(params.HS) + params.eps);
        var w: vec4<f32>;
        if (h < params.NH) { w = qNorm[d4]; } else { w = kNorm[d4]; }
        v = v * rstd * w;
      }
      let other = subgroupShuffle(v, partner);
      v = select(v * c + other * s, v * c - other * s, d4 < half4);
      if (h < params.NH) {
        v *= params.scale;
      } else if (store) {
        kCache[cacheAt + (h - params.NH) * HS4] = v;
      }
      if (live) { mem[at] = v; }
    }
    for (var g = 0u; g < params.NKV; g++) {
      if (store) { vCache[cacheAt + g * HS4] = mem[L.qkv + r * L.QS + (params.NH + params.NKV + g) * HS4 + d4]; }
    }
  }
}

// Online softmax state of one query head: running max, running sum, weighted values.
struct HeadState {
  m: f32,
  s: f32,
  o: vec4<f32>,
}

// The state after key k with value v, for query q (lanes past the head hold nothing); a key the mask drops
// (keep false) leaves it as it was. A select, not a branch: the mask bit is not known to be subgroup-uniform.
fn attendKey(state: HeadState, q: vec4<f32>, k: vec4<f32>, v: vec4<f32>, live: bool, keep: bool) -> HeadState {
  let score = subgroupAdd(select(0.0, dot(q, k), live));
  let m = select(state.m, max(state.m, score), keep);
  let correction = exp(state.m - m);
  let p = select(0.0, exp(score - m), keep);
  return HeadState(m, state.s * correction + p, state.o * correction + p * v);
}

// mem[att + r] = each query head of row r attended to the slots [0, slot] its key mask keeps (online softmax);
// the new slot's k and v come from mem[qkv], not from the cache writes of this dispatch. Query heads go through
// their kv head's keys two at a time (GQA): each cached key and value is loaded once for both.
fn attend(L: Layout, lane: u32, b0: u32) {
  let HS4 = params.HS / 4u;
  let live = lane < HS4;
  let d4 = min(lane, HS4 - 1u);
  let REP = params.NH / params.NKV;
  let slotStride = params.NKV * HS4;
  for (var r = 0u; r < ROWS; r++) {
    let b = sequence(b0, r);
    let rowAt = L.qkv + r * L.QS;
    for (var g = 0u; g < params.NKV; g++) {
      for (var i = 0u; i < REP; i += 2u) {
        let h = g * REP + i;
        // The last head of an odd REP goes alone.
        let pair = i + 1u < REP;
        let q0 = mem[rowAt + h * HS4 + d4];
        let q1 = mem[rowAt + select(h, h + 1u, pair) * HS4 + d4];
        let kNew = mem[rowAt + (params.NH + g) * HS4 + d4];
        let vNew = mem[rowAt + (params.NH + params.NKV + g) * HS4 + d4];
        let cacheAt = b * params.capacity * slotStride + g * HS4 + d4;
        var first = HeadState(NEG_BIG, 0.0, vec4<f32>(0.0));
        var second = first;
        var kept = 0u;
        for (var j = 0u; j <= params.slot; j++) {
          // The key mask of 8 slots at a time, one slot a lane, as the bits of a ballot: one load per 8 keys.
          if (j % LANES == 0u) {
            kept = subgroupBallot(keyMask[b * params.maskBatchStride + min(j + lane, params.slot)] != 0u).x;
          }
          let keep = ((kept >> (j % LANES)) & 1u) != 0u;
          var k = kNew;
          var v = vNew;
          if (j != params.slot) {
            k = kCache[cacheAt + j * slotStride];
            v = vCache[cacheAt + j * slotStride];
          }
          first = attendKey(first, q0, k, v, live, keep);
          if (pair) { second = attendKey(second, q1, k, v, live, keep); }
        }
        if (live) { mem[L.att + r * L.A4 + h * HS4 + d4] = first.o / first.s; }
        if (live && pair) { mem[L.att + r * L.A4 + (h + 1u) * HS4 + d4] = second.o / second.s; }
      }
    }
  }
}

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let L = regions();
  let b0 = wid.x * ROWS;
  let W4 = (params.NH + 2u * params.NKV) * params.HS / 4u;
  let I4 = params.I / 4u;
  for (var r = 0u; r < ROWS; r++) {
    for (var j = lane; j < L.C4; j += LANES) { mem[L.x + r * L.C4 + j] = x[sequence(b0, r) * L.C4 + j]; }
  }
  workgroupBarrier();
  normRows(L, lane, true);
  workgroupBarrier();
  for (var base = 0u; base < W4; base += 2u * LANES) {
    let n = project_qkvW(lane, base, L.normed, L.C4, L.C4, W4, W4);
    storeQkv(L, 0u, n, W4, acc[0], acc[1]);
    storeQkv(L, 1u, n, W4, acc[2], acc[3]);
    storeQkv(L, 2u, n, W4, acc[4], acc[5]);
    storeQkv(L, 3u, n, W4, acc[6], acc[7]);
  }
  workgroupBarrier();
  prepareHeads(L, lane, b0);
  workgroupBarrier();
  attend(L, lane, b0);
  workgroupBarrier();
  for (var base = 0u; base < L.C4; base += 2u * LANES) {
    let n = project_oW(lane, base, L.att, L.A4, L.A4, L.C4, L.C4);
    addToResidual(L, 0u, n, true, acc[0], acc[1]);
    addToResidual(L, 1u, n, true, acc[2], acc[3]);
    addToResidual(L, 2u, n, true, acc[4], acc[5]);
    addToResidual(L, 3u, n, true, acc[6], acc[7]);
  }
  workgroupBarrier();
  normRows(L, lane, false);
  workgroupBarrier();
  for (var base = 0u; base < I4; base += LANES) {
    let n = project_gateUpW(lane, base, L.normed, L.C4, L.C4, 2u * I4, I4);
    storeAct(L, 0u, n.x, I4, acc[0], acc[1]);
    storeAct(L, 1u, n.x, I4, acc[2], acc[3]);
    storeAct(L, 2u, n.x, I4, acc[4], acc[5]);
    storeAct(L, 3u, n.x, I4, acc[6], acc[7]);
  }
  workgroupBarrier();
  for (var base = 0u; base < L.C4; base += 2u * LANES) {
    let n = project_downW(lane, base, L.qkv, L.QS, I4, L.C4, L.C4);
    addToResidual(L, 0u, n, false, acc[0], acc[1]);
    addToResidual(L, 1u, n, false, acc[2], acc[3]);
    addToResidual(L, 2u, n, false, acc[4], acc[5]);
    addToResidual(L, 3u, n, false, acc[6], acc[7]);
  }
  workgroupBarrier();
  for (var r = 0u; r < ROWS; r++) {
    if (b0 + r >= params.B) { break; }
    for (var j = lane; j < L.C4; j += LANES) { x[(b0 + r) * L.C4 + j] = mem[L.x + r * L.C4 + j]; }
  }
}
