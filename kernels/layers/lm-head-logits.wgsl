// lm-head-logits: full logits of up to 4 rows for sampling (decode steps), on CPU implementations (lavapipe).
//   out (N, V) [n, v0 + j] = hidden (N, C) [n, :] · weight (width, C) [j, :] for j < width, where `weight` is the
//   vocabulary rows [v0, v0 + width) of the unembedding (one binding; a larger one takes several dispatches).
// On lavapipe a storage load instruction costs about the same per SIMD vector (~25 ns) whether its 8 lanes
// read 8 addresses or one, and accumulators past the 16 vector registers spill. A decode step multiplies a few
// rows by 152k weight rows, so the general register kernel (8x8 outputs a lane) pays for 8 rows of FMAs,
// spills and hidden loads when 4 or fewer are real. Here a workgroup owns ROWS = 4 rows of hidden and 32
// weight rows, 4 per lane: per four k, 4 weight loads (32 distinct vec4s across the lanes) and 4 hidden loads,
// 64 FMAs into 4 vec4 accumulators (one per weight row, its components the 4 rows). Writes go straight to out
// at column v0 (no scratch, no placement pass). Measured by CPU time against the register kernel's route,
// 4 rows at vocabulary 151,936: 2.0x at hidden 1,024, 1.55x at 128 (8 weight rows a lane: 1.7x, 1.2x; 2: 1.7x,
// 1.55x); from 16 rows on the register kernel's 8-row reuse of each weight load wins (0.86x here at 16).
// v1: 8 lanes × 4 weight rows × 4 hidden rows per workgroup, vec4 along C (C % 4 == 0).
// Rows past the end are clamped for loading and dropped at the store.

const ROWS = 4u;
const WEIGHT_ROWS_PER_LANE = 4u;

var<private> acc: array<vec4<f32>, 4>;

// acc[i] += (x0 · w, x1 · w, x2 · w, x3 · w): weight row i's vec4 w dotted with the 4 rows' vec4s.
fn accumulateRow(i: u32, w: vec4<f32>, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>) {
  acc[i] += vec4<f32>(dot(x0, w), dot(x1, w), dot(x2, w), dot(x3, w));
}

@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>) {
  let C4 = params.C / 4u;
  let j0 = ((wid.x + wid.y * nwg.x) * 8u + lane) * WEIGHT_ROWS_PER_LANE;
  let n0 = wid.z * ROWS;
  let lastRow = params.N - 1u;
  let h0 = min(n0, lastRow) * C4;
  let h1 = min(n0 + 1u, lastRow) * C4;
  let h2 = min(n0 + 2u, lastRow) * C4;
  let h3 = min(n0 + 3u, lastRow) * C4;
  let last = params.width - 1u;
  let w0 = min(j0, last) * C4;
  let w1 = min(j0 + 1u, last) * C4;
  let w2 = min(j0 + 2u, last) * C4;
  let w3 = min(j0 + 3u, last) * C4;
  for (var k = 0u; k < C4; k++) {
    let x0 = hidden[h0 + k]; let x1 = hidden[h1 + k]; let x2 = hidden[h2 + k]; let x3 = hidden[h3 + k];
    accumulateRow(0u, weight[w0 + k], x0, x1, x2, x3);
    accumulateRow(1u, weight[w1 + k], x0, x1, x2, x3);
    accumulateRow(2u, weight[w2 + k], x0, x1, x2, x3);
    accumulateRow(3u, weight[w3 + k], x0, x1, x2, x3);
  }
  // Stored from a copy: a dynamic index into acc itself would move the accumulators out of registers.
  let block = acc;
  let columns = min(WEIGHT_ROWS_PER_LANE, params.width - min(j0, params.width));
  let rows = min(ROWS, params.N - min(n0, params.N));
  for (var r = 0u; r < rows; r++) {
    let at = (n0 + r) * params.V + params.v0 + j0;
    for (var i = 0u; i < columns; i++) { out[at + i] = block[i][r]; }
  }
}
