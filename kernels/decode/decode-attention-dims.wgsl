// decode-attention (dims): decode-attention.wgsl's computation (same bindings, uniforms and results) for CPU
// devices with subgroups of at least 8 lanes and HS <= 32. One workgroup of 8 lanes per (kv group, sequence);
// lane d holds vec4 d of every head vector (lanes past HS/4 repeat the last one and add nothing), and all lanes
// visit the keys together in order. A key's score is a subgroupAdd of the lanes' partial dot products, so the
// online softmax is the same in every lane, each lane updates its own 4 output columns, and nothing is merged
// through workgroup memory at the end (no barrier). The keys-per-lane variant's lanes each held whole heads of
// q, k, v and accumulators (~190 floats a lane at HS 32, spilled) and merged 8 partial softmaxes: for the tiny
// model's 4 layers at 75 cached keys, 0.53-0.63 ms against 0.66-0.88 ms (same run).
// ROPE: lane d's rotated chunk also reads chunk d ± HS/8 of its head (rope.wgsl's rotate-half pairs).
// HS (a multiple of 4, at most 32), REP = NH / NKV and ROPE are consts the launcher prepends, and the cache's
// loadK/loadV/storeK/storeV (kv-cache-access.ts).

const HS4: u32 = HS / 4u;
// A finite "minus infinity": exp of differences stays NaN-free before the first unmasked key.
const NEG_BIG: f32 = -1.0e30;

// Chunk d4 of the head vector starting at vec4 `at` of qkv, rotated by RoPE (cos c, sin s of its angles) when ROPE.
fn headChunk(at: u32, d4: u32, c: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
  let x = qkv[at + d4];
  if (!ROPE) { return x; }
  let half4 = HS4 / 2u;
  if (d4 < half4) { return x * c - qkv[at + d4 + half4] * s; }
  return x * c + qkv[at + d4 - half4] * s;
}

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let g = wid.x;
  let b = wid.y;
  let live = lane < HS4;
  let d4 = min(lane, HS4 - 1u);
  let rowAt = b * (params.W / 4u);
  let qAt = rowAt + g * REP * HS4;
  let kNewAt = rowAt + params.NKV * REP * HS4 + g * HS4;
  let vNewAt = kNewAt + params.NKV * HS4;
  let slotStride = params.NKV * HS4;
  let cacheAt = b * params.capacity * slotStride + g * HS4 + d4;
  var c = vec4<f32>(1.0);
  var s = vec4<f32>(0.0);
  if (ROPE) {
    let angle = reduceAngle(f32(positions[b]) * invFreq[d4 % (HS4 / 2u)]);
    c = cos(angle);
    s = sin(angle);
  }
  // Scaled after the rotation, as when a rope dispatch ran before.
  var q: array<vec4<f32>, REP>;
  for (var r = 0u; r < REP; r++) { q[r] = params.scale * headChunk(qAt + r * HS4, d4, c, s); }
  // As the cache holds them (rounded for a half cache), also where this step attends them.
  let kNew = asStored(headChunk(kNewAt, d4, c, s));
  let vNew = asStored(qkv[vNewAt + d4]);
  if (live) {
    storeK(cacheAt + params.slot * slotStride, kNew);
    storeV(cacheAt + params.slot * slotStride, vNew);
  }

  var runningMax: array<f32, REP>;
  var runningSum: array<f32, REP>;
  var acc: array<vec4<f32>, REP>;
  for (var r = 0u; r < REP; r++) { runningMax[r] = NEG_BIG; }
  // Every slot up to the new one at `slot`, which comes from qkv (no lane reads what another writes).
  for (var j = 0u; j <= params.slot; j++) {
    if (keyMask[b * params.maskBatchStride + j] == 0u) { continue; }
    var k = kNew;
    var v = vNew;
    if (j != params.slot) {
      k = loadK(cacheAt + j * slotStride);
      v = loadV(cacheAt + j * slotStride);
    }
    for (var r = 0u; r < REP; r++) {
      let score = subgroupAdd(select(0.0, dot(q[r], k), live));
      let newMax = max(runningMax[r], score);
      let correction = exp(runningMax[r] - newMax);
      let p = exp(score - newMax);
      runningSum[r] = runningSum[r] * correction + p;
      acc[r] = acc[r] * correction + p * v;
      runningMax[r] = newMax;
    }
  }
  if (live) {
    for (var r = 0u; r < REP; r++) { out[(b * params.NKV * REP + g * REP + r) * HS4 + d4] = acc[r] / runningSum[r]; }
  }
}
