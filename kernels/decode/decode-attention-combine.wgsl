// decode-attention combine (flash-decoding's second pass): merges the per-split partial softmax states that
// decode-attention.wgsl wrote for a long cache into out.
//   partials (B·NH, splits, 1 + HS/4) vec4: per (head, split) first (max m_s, sum l_s, 0, 0), then the split's
//     unnormalised output o_s (weights exp(score − m_s)); a split that saw no visible key has m_s = −1e30, l_s = 0
//   out (B·NH, HS) = Σ_s o_s·exp(m_s − M) / Σ_s l_s·exp(m_s − M), M = max_s m_s
// HS (a multiple of 4, at most 128) is a const the launcher prepends.
// v1: one workgroup of 32 lanes per (head, sequence), lane d4 owns output vec4 d4 and walks the splits in order
//     (deterministic). Its traffic is splits·(HS + 4) floats a head, under 2% of the cache reads the splits made
//     (each split covers at least 256 slots of 2·HS floats).

const HS4: u32 = HS / 4u;
const NEG_BIG: f32 = -1.0e30;

@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let head = wid.y * params.NH + wid.x;
  let first = head * params.splits * (HS4 + 1u);
  var total = NEG_BIG;
  for (var s = 0u; s < params.splits; s++) { total = max(total, partials[first + s * (HS4 + 1u)].x); }
  for (var d4 = lane; d4 < HS4; d4 += 32u) {
    var normalizer = 0.0;
    var o = vec4<f32>(0.0);
    for (var s = 0u; s < params.splits; s++) {
      let at = first + s * (HS4 + 1u);
      let state = partials[at];
      let weight = exp(state.x - total);
      normalizer += state.y * weight;
      o += partials[at + 1u + d4] * weight;
    }
    out[head * HS4 + d4] = o / normalizer;
  }
}
