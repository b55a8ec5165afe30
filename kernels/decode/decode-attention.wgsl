// decode-attention: one new token per sequence attending its KV cache (a decode step), fused with storing that
// token's key and value in the cache.
//   qkv (B, W), W = (NH + 2·NKV)·HS, after RoPE: q heads, then k, then v of the new token
//   kCache, vCache (B, capacity, NKV·HS): slots [0, slot) hold earlier tokens; the new k, v go to slot `slot`
//   keyMask (B, maskBatchStride) u32, 1 = real token; out (B, NH·HS)
//   out[b, h] = softmax_j(scale · q_h·k_j over j ≤ slot with keyMask[b, j] = 1) · v_j, kv group g = h / REP
// ROPE (HS a multiple of 8): qkv holds q and k before RoPE, and each workgroup rotates its REP query heads and
//   its new key itself (rope.wgsl's formula, angles from positions[b] and invFreq, so the same bits), saving the
//   rope dispatch of a decode step. qkv is read-only here, so they are rotated in registers.
// HS (a multiple of 4), REP = NH / NKV and ROPE are consts the launcher prepends: per-lane head vectors are private
// arrays, whose length WGSL only accepts as a const. It also prepends kv-cache-access.ts's loadK/loadV/storeK/storeV
// for the cache's storage (float32, or bf16/f16 pairs: rounded when stored, and the new key and value, read from
// qkv, are attended rounded too, asStored: as a prefill attends them and as later steps will read them).
// v1: one workgroup of WG lanes per (kv group, sequence, split), so each cached k and v is loaded once for the REP
//     query heads that share it (loads are what a decode step pays for); lane i takes keys i, i + WG, ... of its
//     split's slots [split·splitKeys, (split+1)·splitKeys) ∩ [0, slot] with its own online softmax, vec4 loads.
//     The new key is read from qkv, not the cache, so no workgroup reads what another writes (split 0 stores it).
//     The WG partial states merge in workgroup memory in lane order (deterministic), and storeResult (prepended
//     by the launcher) writes either out (one split: splitKeys = slot + 1) or the split's partial softmax state
//     (flash-decoding: decode-attention-combine.wgsl merges the splits).
// Cache windows: a row whose cache layer is above one binding is attended one window of slots at a time (one dispatch
//     each, kCache/vCache bound from slot keyBase): this dispatch's splits are splitBase, splitBase + 1, ... over
//     [keyBase, keyEnd), and storesNew says whether the new slot lies in its window. Whole: keyBase = 0, splitBase = 0,
//     keyEnd = slot + 1, storesNew = 1.

const HS4: u32 = HS / 4u;
// A finite "minus infinity": exp of differences stays NaN-free for lanes that saw no key.
const NEG_BIG: f32 = -1.0e30;

override WG: u32 = 32u;

var<workgroup> mergeMax: array<f32, WG * REP>;
// WG again, read back through workgroup memory: a bound the shader compiler cannot fold keeps the merge loops
// rolled (unrolled, lavapipe compiled wg8 in 1.4-1.7x the time; the merge runs once per workgroup).
var<workgroup> mergeLanes: u32;
var<workgroup> mergeSum: array<f32, WG * REP>;
var<workgroup> mergeAcc: array<vec4<f32>, WG * REP * HS4>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let g = wid.x;
  let b = wid.y;
  let rowAt = b * (params.W / 4u);
  let qAt = rowAt + g * REP * HS4;
  let kNewAt = rowAt + params.NKV * REP * HS4 + g * HS4;
  let vNewAt = kNewAt + params.NKV * HS4;
  let slotStride = params.NKV * HS4;
  let cacheAt = b * params.capacity * slotStride + g * HS4;
  var q: array<vec4<f32>, REP * HS4>;
  var kNew: array<vec4<f32>, HS4>;
  for (var i = 0u; i < REP * HS4; i++) { q[i] = qkv[qAt + i]; }
  for (var d4 = 0u; d4 < HS4; d4++) { kNew[d4] = qkv[kNewAt + d4]; }
  if (ROPE) {
    let position = f32(positions[b]);
    let half4 = HS4 / 2u;
    for (var i4 = 0u; i4 < half4; i4++) {
      let angle = reduceAngle(position * invFreq[i4]);
      let c = cos(angle);
      let s = sin(angle);
      for (var r = 0u; r < REP; r++) {
        let x1 = q[r * HS4 + i4];
        let x2 = q[r * HS4 + i4 + half4];
        q[r * HS4 + i4] = x1 * c - x2 * s;
        q[r * HS4 + i4 + half4] = x2 * c + x1 * s;
      }
      let k1 = kNew[i4];
      let k2 = kNew[i4 + half4];
      kNew[i4] = k1 * c - k2 * s;
      kNew[i4 + half4] = k2 * c + k1 * s;
    }
  }
  // Scaled after the rotation, as when a rope dispatch ran before.
  for (var i = 0u; i < REP * HS4; i++) { q[i] = params.scale * q[i]; }
  let split = params.splitBase + wid.z;
  if (wid.z == 0u && params.storesNew == 1u) {
    for (var d4 = lane; d4 < HS4; d4 += WG) {
      storeK(cacheAt + (params.slot - params.keyBase) * slotStride + d4, kNew[d4]);
      storeV(cacheAt + (params.slot - params.keyBase) * slotStride + d4, qkv[vNewAt + d4]);
    }
  }

  var runningMax: array<f32, REP>;
  var runningSum: array<f32, REP>;
  var acc: array<vec4<f32>, REP * HS4>;
  for (var r = 0u; r < REP; r++) { runningMax[r] = NEG_BIG; }
  // Keys lane, lane + WG, ... of this split, up to the new one at `slot`, which comes from qkv.
  let keyStart = params.keyBase + wid.z * params.splitKeys;
  let keyEnd = min(keyStart + params.splitKeys, params.keyEnd);
  for (var j = keyStart + lane; j < keyEnd; j += WG) {
    if (keyMask[b * params.maskBatchStride + j] == 0u) { continue; }
    var k: array<vec4<f32>, HS4>;
    var v: array<vec4<f32>, HS4>;
    if (j == params.slot) {
      for (var d4 = 0u; d4 < HS4; d4++) { k[d4] = asStored(kNew[d4]); v[d4] = asStored(qkv[vNewAt + d4]); }
    } else {
      let kAt = cacheAt + (j - params.keyBase) * slotStride;
      for (var d4 = 0u; d4 < HS4; d4++) { k[d4] = loadK(kAt + d4); v[d4] = loadV(kAt + d4); }
    }
    for (var r = 0u; r < REP; r++) {
      var score = 0.0;
      for (var d4 = 0u; d4 < HS4; d4++) { score += dot(q[r * HS4 + d4], k[d4]); }
      let newMax = max(runningMax[r], score);
      let correction = exp(runningMax[r] - newMax);
      let p = exp(score - newMax);
      runningSum[r] = runningSum[r] * correction + p;
      for (var d4 = 0u; d4 < HS4; d4++) { acc[r * HS4 + d4] = acc[r * HS4 + d4] * correction + p * v[d4]; }
      runningMax[r] = newMax;
    }
  }

  for (var r = 0u; r < REP; r++) {
    mergeMax[r * WG + lane] = runningMax[r];
    mergeSum[r * WG + lane] = runningSum[r];
    for (var d4 = 0u; d4 < HS4; d4++) { mergeAcc[(r * WG + lane) * HS4 + d4] = acc[r * HS4 + d4]; }
  }
  if (lane == 0u) { mergeLanes = WG; }
  workgroupBarrier();
  let lanes = mergeLanes;
  // Lane i finishes output columns i, i + WG, ... of the REP heads.
  for (var c = lane; c < REP * HS4; c += WG) {
    let r = c / HS4;
    let d4 = c % HS4;
    var total = NEG_BIG;
    for (var i = 0u; i < lanes; i++) { total = max(total, mergeMax[r * WG + i]); }
    var normalizer = 0.0;
    var o = vec4<f32>(0.0);
    for (var i = 0u; i < lanes; i++) {
      let weight = exp(mergeMax[r * WG + i] - total);
      normalizer += mergeSum[r * WG + i] * weight;
      o += mergeAcc[(r * WG + i) * HS4 + d4] * weight;
    }
    storeResult(b * params.NKV * REP + g * REP + r, d4, split, o, normalizer, total);
  }
}
