// embedding: token embedding lookup, N = B*T rows, table (V, C).
//   forward:  out[n, c] = table[min(ids[n], V - 1), c]        ids (N) u32, out (N, C); ids >= V are clamped
//   backward: dTable[v, c] (+)= sum over positions n with ids[n] == v of dOut[n, c], from the CSR token index
//             (tokenOffsets (V + 1), tokenPositions (N), built on the host) so every row is summed by one
//             workgroup in a fixed order, without atomics
// Both see the table through a window of rows [v0, v0 + rows) (`table`/`dTable` bind only those rows): a
// vocabulary of 152K rows outgrows one storage binding, so the launcher dispatches once per window and each
// dispatch handles the tokens whose id falls inside it.
// v1 forward: one lane per vecN of out (vec4 when C % 4 == 0), 256 lanes per workgroup (on lavapipe ~1.5x faster
//    than a workgroup per row, which pays a fixed cost per workgroup). The table is float32 or a frozen model's
//    bf16/f16 (the launcher prepends `tableAt`, which unpacks half rows: a vec2<u32> brings a vec4's 4 values).
// v1 backward: one 64-lane workgroup per entry k of tokenPositions; the workgroup holding the first entry of a
//    token's run sums the whole run, the others exit. Rows of absent tokens are left alone (cleared by the
//    launcher when not accumulating), so the cost follows N, not V.

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

// The token whose run in tokenPositions holds entry k: the last v with tokenOffsets[v] <= k.
fn tokenOfEntry(k: u32) -> u32 {
  var lo = 0u;
  var hi = params.V;
  while (hi - lo > 1u) {
    let mid = (lo + hi) / 2u;
    if (tokenOffsets[mid] <= k) { lo = mid; } else { hi = mid; }
  }
  return lo;
}

@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let k = wid.x + wid.y * nwg.x;
  if (k >= params.N) { return; }
  let v = tokenOfEntry(k);
  let first = tokenOffsets[v];
  if (first != k || v < params.v0 || v >= params.v0 + params.rows) { return; }
  let last = tokenOffsets[v + 1u];
  let n = params.C / VW;
  let row = (v - params.v0) * n;
  for (var j = lane; j < n; j += WG) {
    var sum = vecN(0.0);
    for (var e = first; e < last; e++) { sum += dOut[tokenPositions[e] * n + j]; }
    if (params.accumulate != 0u) { sum += dTable[row + j]; }
    dTable[row + j] = sum;
  }
}
