// matmul: out[M, N] = alpha·op(A)·op(B) (+ bias[N]) (+ out), one dispatch with bias and accumulate fused.
//   nn: A [M, K], B [K, N]   (dx = dy·W)
//   nt: A [M, K], B [N, K]   (y = x·Wᵀ, W in Hugging Face [out, in] layout)
//   tn: A [K, M], B [K, N]   (dW = dyᵀ·x)
// tiled: 64x64 output tile per workgroup of 64 lanes, 8x8 outputs per lane in registers, K in steps of 32
//   through workgroup tiles stored k-major so the inner loop reads 4 vec4s per 64 FMAs whatever the layout;
//   global loads are vec4 when the operand's rows are a multiple of 4 floats, bounds-checked scalars otherwise.
// a and b are bound as vec4 arrays over views padded to whole vec4s (the launcher checks the padding exists).

// nn, nt: A is [M, K]; tn: A is [K, M].
override A_K_CONTIGUOUS: bool;
// nt: B is [N, K]; nn, tn: B is [K, N].
override B_K_CONTIGUOUS: bool;
// The contiguous dimension of A (of B) is a multiple of 4: whole vec4s are either in bounds or out.
override A_VEC4: bool;
override B_VEC4: bool;

const TILE_M = 64u;
const TILE_N = 64u;
const TILE_K = 32u;
const LANES = 64u;
// Vec4 loads per lane to fill one operand tile (TILE_K x 64 floats).
const LOADS_PER_LANE = TILE_K * 64u / 4u / LANES;

// [k][m] and [k][n], 16 vec4s per k.
var<workgroup> tileA: array<vec4<f32>, TILE_K * TILE_M / 4u>;
var<workgroup> tileB: array<vec4<f32>, TILE_K * TILE_N / 4u>;

// Four consecutive floats of a row-major [rows, cols] operand starting at (row, col), zero outside it.
fn loadA(row: u32, col: u32, rows: u32, cols: u32) -> vec4<f32> {
  if (row >= rows) { return vec4<f32>(0.0); }
  let start = row * cols + col;
  if (A_VEC4) {
    if (col >= cols) { return vec4<f32>(0.0); }
    return a[start / 4u];
  }
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) {
    if (col + j < cols) { v[j] = a[(start + j) / 4u][(start + j) % 4u]; }
  }
  return v;
}

fn loadB(row: u32, col: u32, rows: u32, cols: u32) -> vec4<f32> {
  if (row >= rows) { return vec4<f32>(0.0); }
  let start = row * cols + col;
  if (B_VEC4) {
    if (col >= cols) { return vec4<f32>(0.0); }
    return b[start / 4u];
  }
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) {
    if (col + j < cols) { v[j] = b[(start + j) / 4u][(start + j) % 4u]; }
  }
  return v;
}

// Stores v, four consecutive k of one output row/column `i`, into a k-major tile.
fn scatterA(k: u32, i: u32, v: vec4<f32>) {
  for (var j = 0u; j < 4u; j++) { tileA[(k + j) * (TILE_M / 4u) + i / 4u][i % 4u] = v[j]; }
}

fn scatterB(k: u32, i: u32, v: vec4<f32>) {
  for (var j = 0u; j < 4u; j++) { tileB[(k + j) * (TILE_N / 4u) + i / 4u][i % 4u] = v[j]; }
}

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let M = params.M;
  let N = params.N;
  let K = params.K;
  let m0 = wid.y * TILE_M;
  let n0 = wid.x * TILE_N;
  // This lane's 8x8 block: rows m0 + 8·laneRow + i, columns n0 + 8·laneCol + j.
  let laneRow = lane / 8u;
  let laneCol = lane % 8u;
  var acc: array<vec4<f32>, 16>;

  for (var k0 = 0u; k0 < K; k0 += TILE_K) {
    for (var t = 0u; t < LOADS_PER_LANE; t++) {
      let slot = lane + t * LANES;
      if (A_K_CONTIGUOUS) {
        let m = slot / (TILE_K / 4u);
        let k = (slot % (TILE_K / 4u)) * 4u;
        scatterA(k, m, loadA(m0 + m, k0 + k, M, K));
      } else {
        let k = slot / (TILE_M / 4u);
        let m = (slot % (TILE_M / 4u)) * 4u;
        tileA[slot] = loadA(k0 + k, m0 + m, K, M);
      }
      if (B_K_CONTIGUOUS) {
        let n = slot / (TILE_K / 4u);
        let k = (slot % (TILE_K / 4u)) * 4u;
        scatterB(k, n, loadB(n0 + n, k0 + k, N, K));
      } else {
        let k = slot / (TILE_N / 4u);
        let n = (slot % (TILE_N / 4u)) * 4u;
        tileB[slot] = loadB(k0 + k, n0 + n, K, N);
      }
    }
    workgroupBarrier();
    for (var k = 0u; k < TILE_K; k++) {
      let a0 = tileA[k * (TILE_M / 4u) + laneRow * 2u];
      let a1 = tileA[k * (TILE_M / 4u) + laneRow * 2u + 1u];
      let b0 = tileB[k * (TILE_N / 4u) + laneCol * 2u];
      let b1 = tileB[k * (TILE_N / 4u) + laneCol * 2u + 1u];
      for (var i = 0u; i < 4u; i++) {
        acc[2u * i] += a0[i] * b0;
        acc[2u * i + 1u] += a0[i] * b1;
        acc[2u * i + 8u] += a1[i] * b0;
        acc[2u * i + 9u] += a1[i] * b1;
      }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 8u; i++) {
    let m = m0 + laneRow * 8u + i;
    if (m >= M) { break; }
    for (var j = 0u; j < 8u; j++) {
      let n = n0 + laneCol * 8u + j;
      if (n >= N) { break; }
      storeOutput(m, n, acc[2u * i + j / 4u][j % 4u]);
    }
  }
}
