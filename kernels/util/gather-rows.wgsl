// gather-rows: out[b, t] = source[rows[b] * sourceStride + t] source (N, sourceStride), rows (m) u32, out (m, width) A
// micro-batch's rows of a per-token tensor of the whole experience (old/reference log-probs, values, advantages,
// returns, the response mask), picked by row index on the device instead of sliced on the host and uploaded: the first
// `width` columns of each picked row (a token-budget micro-batch keeps a window of the response columns). v1: one
// invocation per output element, 256 a workgroup, workgroups folded into y. A pure copy: one load and one
//    store per element, so it is memory-bound on either device class (consecutive invocations read consecutive
//    columns of one row: coalesced on a GPU, sequential on a CPU); no variant per class.

const WG = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lane: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lane;
  if (i >= params.m * params.width) { return; }
  let b = i / params.width;
  let t = i - b * params.width;
  out[i] = source[rows[b] * params.sourceStride + t];
}
