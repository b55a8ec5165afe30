// embedding: token embedding lookup, N = B*T rows, table (V, C).
//   forward:  out[n, c] = table[min(ids[n], V - 1), c]        ids (N) u32, out (N, C); ids >= V are clamped
//   backward: dTable[v, c] (+)= sum over positions n with ids[n] == v of dOut[n, c], from the token index built
//             on the host: tokenPositions (N), the positions grouped by id in increasing order, and tokenIds (N),
//             each entry's id — so every row is summed by one workgroup in a fixed order, without atomics, and the
//             index costs 2N u32 whatever the vocabulary (a per-id offsets table was V + 1: 600 KB for Qwen's)
// Both see the table through a window of rows [v0, v0 + rows) (`table`/`dTable` bind only those rows): a
// vocabulary of 152K rows outgrows one storage binding, so the launcher dispatches once per window and each
// dispatch handles the tokens whose id falls inside it.
// v1 forward: one lane per vecN of out (vec4 when C % 4 == 0), 256 lanes per workgroup (on lavapipe ~1.5x faster
//    than a workgroup per row, which pays a fixed cost per workgroup). The table is float32 or a frozen model's
//    bf16/f16 (the launcher prepends `tableAt`, which unpacks half rows: a vec2<u32> brings a vec4's 4 values).
// Backward, two variants differing in who holds entry k of tokenPositions; the holder of the first entry of a
//    token's run sums the whole run in entry order, the others exit. Rows of absent tokens are left alone (cleared
//    by the launcher when not accumulating), so the cost follows N, not V.
// v1 workgroup-per-entry (GPUs): a 64-lane workgroup per entry, its lanes over the row's vecNs.
// v2 lane-per-entry (lavapipe, where a workgroup has a fixed cost and most of v1's exit at once): one lane per
//    entry walks the whole row, 64 entries per workgroup; the same sums in the same order as v1.

//// forward
@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * 256u;
  let n = params.C / VW;
  if (idx >= params.N * n) { return; }
  // Sampled ids come straight from the GPU, so a bad one is clamped here rather than read out of bounds.
  let id = min(ids[idx / n], params.V - 1u);
  if (id < params.v0 || id >= params.v0 + params.rows) { return; }
  out[idx] = tableAt((id - params.v0) * n + idx % n);
}

//// backward
const WG = 64u;

// dTable row `row` (+)= the sum of dOut rows over entries [first, last), in entry order, for vecN column j.
fn sumRun(first: u32, last: u32, row: u32, j: u32, n: u32) {
  var sum = vecN(0.0);
  for (var e = first; e < last; e++) { sum += dOut[tokenPositions[e] * n + j]; }
  if (params.accumulate != 0u) { sum += dTable[row + j]; }
  dTable[row + j] = sum;
}

// The run [first, last) of the token whose run starts at entry k, if one does (k is its token's first entry) and the
// token is in this window; the run's end is found by walking it, which its summing walks again.
fn runStartingAt(k: u32, run: ptr<function, vec3<u32>>) -> bool {
  let v = tokenIds[k];
  if ((k > 0u && tokenIds[k - 1u] == v) || v < params.v0 || v >= params.v0 + params.rows) { return false; }
  var last = k + 1u;
  while (last < params.N && tokenIds[last] == v) { last++; }
  *run = vec3<u32>(k, last, (v - params.v0) * (params.C / VW));
  return true;
}

//// backward-workgroup-per-entry
@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let k = wid.x + wid.y * nwg.x;
  var run: vec3<u32>;
  if (k >= params.N || !runStartingAt(k, &run)) { return; }
  let n = params.C / VW;
  for (var j = lane; j < n; j += WG) { sumRun(run.x, run.y, run.z, j, n); }
}

//// backward-lane-per-entry
@compute @workgroup_size(WG)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let k = gid.x + gid.y * nwg.x * WG;
  var run: vec3<u32>;
  if (k >= params.N || !runStartingAt(k, &run)) { return; }
  let n = params.C / VW;
  for (var j = 0u; j < n; j++) { sumRun(run.x, run.y, run.z, j, n); }
}
