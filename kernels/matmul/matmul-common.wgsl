// Shared by every matmul variant (appended to each source): the layout constants and the fused epilogue.
// Bindings: a, b as f32 arrays; a4, b4 the same memory as vec4 arrays (for the vec4 paths); bias; out.

// nn, nt: A is [M, K]; tn: A is [K, M].
override A_K_CONTIGUOUS: bool;
// nt: B is [N, K]; nn, tn: B is [K, N].
override B_K_CONTIGUOUS: bool;
// The contiguous dimension of A (of B) is a multiple of 4 floats, so its rows split into whole vec4s.
override A_VEC4: bool;
override B_VEC4: bool;

// out[m, n] = alpha·sum (+ bias[n]) (+ out[m, n]); the caller has checked m < M and n < N. Rows of out are
// outStride apart and column n is element nOffset + n of a row and of bias: a window of a weight's rows (nt) writes
// a window of out's columns (the launcher's weight windows; unsplit: outStride N, nOffset 0).
fn storeOutput(m: u32, n: u32, sum: f32) {
  let index = m * params.outStride + params.nOffset + n;
  var value = params.alpha * sum;
  if (params.hasBias != 0u) { value += bias[params.nOffset + n]; }
  if (params.accumulate != 0u) { value += out[index]; }
  out[index] = value;
}

// The 8x8 block at (m0, n0) held by one lane: row i in block[2i] (columns n0..n0+3) and block[2i+1]
// (n0+4..n0+7); outputs past M or N are dropped. Taken by value: the copy is what gets indexed dynamically,
// so the caller's accumulators stay in registers. A loop, not 64 inlined epilogues, which take lavapipe
// seconds to compile.
fn storeBlock(m0: u32, n0: u32, block: array<vec4<f32>, 16>) {
  for (var e = 0u; e < 64u; e++) {
    let i = e / 8u;
    let j = e % 8u;
    if (m0 + i < params.M && n0 + j < params.N) { storeOutput(m0 + i, n0 + j, block[2u * i + j / 4u][j % 4u]); }
  }
}
