// attention merge: one query window's attention over keys [0, keyStart) (out, lse: the accumulator) and over the key
//   window [keyStart, keyEnd) (partOut, partLse: attention-forward's output for it), merged by their log-sum-exp into
//   the attention over keys [0, keyEnd), written over out and lse. The math of decode-attention-combine.wgsl (flash-
//   decoding's second pass) for two normalised partial states: with M = max(a, c), wa = e^(a − M), wc = e^(c − M),
//   out = (outA·wa + outC·wc) / (wa + wc) and lse = M + log(wa + wc).
//   out, partOut (Tq, NH·HS); lse, partLse (NH, Tq); keyMask (keyEnd) u32: the sequence's key mask from key 0.
//   Query t sits at key position queryStart + t (causal). A state whose query saw no key (every key in its range
//   masked) is out = 0, lse = 0 (the forward's convention), told apart by scanning its keys' mask up to the first
//   real key (usually the first read; at worst its range, which the forward read for this query too): the other
//   state is then taken as it is.
// v1: one thread per (query, head), its HS elements in turn; deterministic (no atomics, one writer each).

fn seesKey(first: u32, end: u32) -> bool {
  for (var j = first; j < end; j++) {
    if (keyMask[j] == 1u) { return true; }
  }
  return false;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lane;
  if (i >= params.Tq * params.NH) { return; }
  let h = i / params.Tq;
  let t = i % params.Tq;
  let position = params.queryStart + t;
  if (!seesKey(params.keyStart, min(params.keyEnd, position + 1u))) { return; }
  let at = h * params.Tq + t;
  let base = t * params.NH * params.HS + h * params.HS;
  if (!seesKey(0u, params.keyStart)) {
    lse[at] = partLse[at];
    for (var d = 0u; d < params.HS; d++) { out[base + d] = partOut[base + d]; }
    return;
  }
  let a = lse[at];
  let c = partLse[at];
  let m = max(a, c);
  let wa = exp(a - m);
  let wc = exp(c - m);
  let total = wa + wc;
  for (var d = 0u; d < params.HS; d++) { out[base + d] = (out[base + d] * wa + partOut[base + d] * wc) / total; }
  lse[at] = m + log(total);
}
