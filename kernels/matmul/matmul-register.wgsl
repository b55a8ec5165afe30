// matmul (register): for CPU implementations (lavapipe). Shapes and layouts as in matmul.wgsl.
// 8 lanes per workgroup (one 256-bit SIMD vector) own a ROWSx64 output tile, ROWSx8 outputs per lane in registers;
// no workgroup memory, no barriers: the CPU caches do the reuse. The rows of A are the same for every lane, but
// lavapipe still loads them once per lane (hence A_SHUFFLE below where subgroups allow). B per k: two vec4 loads for
// nn/tn with N a multiple of 4, eight scalars otherwise (nt, odd N); vec4s along k for nt, one component
// used per k, measured slower.
// Indices past the matrix are clamped to its last row/column: loads stay branch-free and valid, and the
// epilogue drops those outputs.

// A_PROLOGUE folds the op before a decode step's matmul into its A loads (one dispatch fewer each), on the nt
// vec4 path and the row-by-row path (nn: a decoder's transposed weights), A [M, K] only:
//   1 rmsnorm: A row m is x[m, :] ∘ prologueWeight / rms(x[m, :]); the weight is applied per k, the 1/rms per
//     row in the epilogue, from the squares summed as A streams by (eps = params.eps).
//   2 swiglu: `a` holds gateUp (M, 2K); A[m, k] = silu(gateUp[m, k]) · gateUp[m, K + k].
override A_PROLOGUE: u32 = 0u;
// OUT_SWIGLU (the row-by-row path, nn): B [K, 2N] holds the gate columns [0, N) and then the up columns [N, 2N)
// of a transposed gate_up weight; a lane accumulates its 8 gate and its 8 up columns side by side (each A load
// serves both) and stores silu(gate)·up: out [M, N] is a decode step's act, and down_proj needs no prologue.
override OUT_SWIGLU: bool = false;

// 8, or 12 where M is large (nn, tn without prologue or epilogue: the training step's shapes): 12 rows against
// each lane's B loads took 10-15% less CPU time than 8 at the tiny model's training shapes (kernel lab, same
// run); 16 were no faster than 12, and 8x4 or 4x8 per lane were 1.3-2x slower.
override ROWS: u32 = 8u;
const MAX_ROWS = 12u;
// The row-by-row path (nn, tn) without a prologue, on devices with subgroups of at least 8 lanes: each lane loads
// A for one k of every 8 and subgroupShuffle hands the values round, instead of every lane loading every A value
// (lavapipe loads per lane even where all lanes read one address). The tiny model's training shapes in the lab,
// same run: 12 rows 36-43% less CPU time than without (1.5-1.75x GFLOP/s). The launcher appends
// matmul-register-shuffle.wgsl (which needs the subgroups feature) to these pipelines, and to the others a
// definition of accumulateShuffledRows that nothing calls, since WGSL checks every function of a module.
override A_SHUFFLE: bool = false;
const COLUMNS = 64u;

// Private, but lowered to registers: every index below is a literal (one dynamic index would move them to
// memory), and the helpers are inlined into the single entry point.
var<private> acc: array<vec4<f32>, 24>;
// Offset of row m0 + i of A (element k of the row adds k·kStride).
var<private> rowOffset: array<u32, MAX_ROWS>;
// Row m0 + i's sum of squares (the rmsnorm prologue).
var<private> sumSq: array<f32, MAX_ROWS>;
// The up columns' accumulators under OUT_SWIGLU, laid out as acc.
var<private> accUp: array<vec4<f32>, 24>;

// A[m0+i, k] at a[rowOffset[i] + at], with A_PROLOGUE applied (g: the rmsnorm weight at k).
fn loadA(i: u32, at: u32, g: f32) -> f32 {
  let x = a[rowOffset[i] + at];
  if (A_PROLOGUE == 1u) {
    sumSq[i] += x * x;
    return x * g;
  }
  if (A_PROLOGUE == 2u) { return x / (1.0 + exp(-x)) * a[rowOffset[i] + params.K + at]; }
  return x;
}

// Row i's A value x times B[k, n..n+7] (lo, hi), and under OUT_SWIGLU times the up columns' (upLo, upHi).
fn accumulateRow(i: u32, x: f32, lo: vec4<f32>, hi: vec4<f32>, upLo: vec4<f32>, upHi: vec4<f32>) {
  acc[2u * i] += x * lo;
  acc[2u * i + 1u] += x * hi;
  if (OUT_SWIGLU) {
    accUp[2u * i] += x * upLo;
    accUp[2u * i + 1u] += x * upHi;
  }
}

// acc += A[m0..m0+7, k] ⊗ B[k, n..n+7], where lo and hi hold B[k, n..n+3] and B[k, n+4..n+7] (upLo, upHi: the up
// columns' under OUT_SWIGLU, unused otherwise).
fn accumulate(k: u32, kStride: u32, lo: vec4<f32>, hi: vec4<f32>, upLo: vec4<f32>, upHi: vec4<f32>) {
  let at = k * kStride;
  var g = 1.0;
  if (A_PROLOGUE == 1u) { g = prologueWeight[k / 4u][k % 4u]; }
  accumulateRow(0u, loadA(0u, at, g), lo, hi, upLo, upHi);
  accumulateRow(1u, loadA(1u, at, g), lo, hi, upLo, upHi);
  accumulateRow(2u, loadA(2u, at, g), lo, hi, upLo, upHi);
  accumulateRow(3u, loadA(3u, at, g), lo, hi, upLo, upHi);
  accumulateRow(4u, loadA(4u, at, g), lo, hi, upLo, upHi);
  accumulateRow(5u, loadA(5u, at, g), lo, hi, upLo, upHi);
  accumulateRow(6u, loadA(6u, at, g), lo, hi, upLo, upHi);
  accumulateRow(7u, loadA(7u, at, g), lo, hi, upLo, upHi);
  if (ROWS > 8u) {
    accumulateRow(8u, loadA(8u, at, g), lo, hi, upLo, upHi);
    accumulateRow(9u, loadA(9u, at, g), lo, hi, upLo, upHi);
    accumulateRow(10u, loadA(10u, at, g), lo, hi, upLo, upHi);
    accumulateRow(11u, loadA(11u, at, g), lo, hi, upLo, upHi);
  }
}

// B[k, n..n+3] from B [K, N] (nn, tn), columns clamped to N - 1; `half` = N: the up columns of an OUT_SWIGLU B.
fn loadRowOfB(k: u32, n: u32, half: u32) -> vec4<f32> {
  let N = params.N;
  let row = k * select(N, 2u * N, OUT_SWIGLU) + half;
  if (B_VEC4) { return bQuad((row + min(n, N - 4u)) / 4u); }
  let last = N - 1u;
  return vec4<f32>(bElement(row + min(n, last)), bElement(row + min(n + 1u, last)), bElement(row + min(n + 2u, last)),
      bElement(row + min(n + 3u, last)));
}

// nt with K a multiple of 4: A and B both read as vec4s along k, four k per step. Per 256 FMAs that is 8 A
// loads (shared by the SIMD vector) and 8 B loads per lane, against 32 and 8 on the row-by-row path above, and
// B's rows stream through the cache instead of striding across it.
var<private> columnOffset: array<u32, 8>;

fn loadA4(i: u32, k: u32) -> vec4<f32> {
  let x = a4[(rowOffset[i] + k) / 4u];
  if (A_PROLOGUE == 1u) {
    sumSq[i] += dot(x, x);
    return x * prologueWeight[k / 4u];
  }
  if (A_PROLOGUE == 2u) {
    let up = a4[(rowOffset[i] + params.K + k) / 4u];
    return x / (1.0 + exp(-x)) * up;
  }
  return x;
}
fn loadB4(j: u32, k: u32) -> vec4<f32> { return bQuad((columnOffset[j] + k) / 4u); }

// acc[row i] += (A[m0+i, k..k+3] · B[n+j, k..k+3]) for j = 0..7.
fn accumulateDots(i: u32, x: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,
                  b4: vec4<f32>, b5: vec4<f32>, b6: vec4<f32>, b7: vec4<f32>) {
  acc[2u * i] += vec4<f32>(dot(x, b0), dot(x, b1), dot(x, b2), dot(x, b3));
  acc[2u * i + 1u] += vec4<f32>(dot(x, b4), dot(x, b5), dot(x, b6), dot(x, b7));
}

// The lane's 8 rows of A at k..k+3 against 8 columns of B at the same k.
fn accumulateRows(k: u32, b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,
                  b4: vec4<f32>, b5: vec4<f32>, b6: vec4<f32>, b7: vec4<f32>) {
  accumulateDots(0u, loadA4(0u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  accumulateDots(1u, loadA4(1u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  accumulateDots(2u, loadA4(2u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  accumulateDots(3u, loadA4(3u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  accumulateDots(4u, loadA4(4u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  accumulateDots(5u, loadA4(5u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  accumulateDots(6u, loadA4(6u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  accumulateDots(7u, loadA4(7u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  if (ROWS > 8u) {
    accumulateDots(8u, loadA4(8u, k), b0, b1, b2, b3, b4, b5, b6, b7);
    accumulateDots(9u, loadA4(9u, k), b0, b1, b2, b3, b4, b5, b6, b7);
    accumulateDots(10u, loadA4(10u, k), b0, b1, b2, b3, b4, b5, b6, b7);
    accumulateDots(11u, loadA4(11u, k), b0, b1, b2, b3, b4, b5, b6, b7);
  }
}

// B[k, n..n+3] from B [N, K] (nt), one scalar per column.
fn loadColumnsOfB(k: u32, n: u32) -> vec4<f32> {
  let K = params.K;
  let last = params.N - 1u;
  return vec4<f32>(bElement(min(n, last) * K + k), bElement(min(n + 1u, last) * K + k),
      bElement(min(n + 2u, last) * K + k), bElement(min(n + 3u, last) * K + k));
}

// The lane's block, each row scaled by its 1/rms under the rmsnorm prologue. Scaled on a copy: a dynamic index
// into acc itself would move the accumulators out of registers.
fn storeRows(m0: u32, n: u32) {
  var block = acc;
  var up = accUp;
  if (A_PROLOGUE == 1u) {
    for (var i = 0u; i < ROWS; i++) {
      let r = inverseSqrt(sumSq[i] / f32(params.K) + params.eps);
      block[2u * i] *= r;
      block[2u * i + 1u] *= r;
      up[2u * i] *= r;
      up[2u * i + 1u] *= r;
    }
  }
  if (OUT_SWIGLU) {
    for (var i = 0u; i < 2u * ROWS; i++) { block[i] = block[i] / (1.0 + exp(-block[i])) * up[i]; }
  }
  storeBlock(m0, n, array<vec4<f32>, 16>(block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7],
    block[8], block[9], block[10], block[11], block[12], block[13], block[14], block[15]));
  // Rows 8..11 of a 12-row tile.
  for (var e = 0u; e < (ROWS - 8u) * 8u; e++) {
    let i = 8u + e / 8u;
    let j = e % 8u;
    if (m0 + i < params.M && n + j < params.N) { storeOutput(m0 + i, n + j, block[2u * i + j / 4u][j % 4u]); }
  }
}

@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let M = params.M;
  let N = params.N;
  let K = params.K;
  let m0 = wid.y * ROWS;
  let n = wid.x * COLUMNS + lane * 8u;
  // A[m, k] is a[aOffset + m·rowStride + k·kStride] in either layout: A's rows are aStride apart (gateUp's are 2K;
  // a window of A's columns under the launcher's weight windows starts at aOffset).
  let rowStride = select(1u, params.aStride, A_K_CONTIGUOUS);
  let kStride = select(params.aStride, 1u, A_K_CONTIGUOUS);
  rowOffset[0] = params.aOffset + min(m0, M - 1u) * rowStride;
  rowOffset[1] = params.aOffset + min(m0 + 1u, M - 1u) * rowStride;
  rowOffset[2] = params.aOffset + min(m0 + 2u, M - 1u) * rowStride;
  rowOffset[3] = params.aOffset + min(m0 + 3u, M - 1u) * rowStride;
  rowOffset[4] = params.aOffset + min(m0 + 4u, M - 1u) * rowStride;
  rowOffset[5] = params.aOffset + min(m0 + 5u, M - 1u) * rowStride;
  rowOffset[6] = params.aOffset + min(m0 + 6u, M - 1u) * rowStride;
  rowOffset[7] = params.aOffset + min(m0 + 7u, M - 1u) * rowStride;
  rowOffset[8] = params.aOffset + min(m0 + 8u, M - 1u) * rowStride;
  rowOffset[9] = params.aOffset + min(m0 + 9u, M - 1u) * rowStride;
  rowOffset[10] = params.aOffset + min(m0 + 10u, M - 1u) * rowStride;
  rowOffset[11] = params.aOffset + min(m0 + 11u, M - 1u) * rowStride;

  if (A_K_CONTIGUOUS && B_K_CONTIGUOUS && A_VEC4 && B_VEC4) {
    for (var j = 0u; j < 8u; j++) { columnOffset[j] = min(n + j, N - 1u) * K; }
    for (var k = 0u; k < K; k += 4u) {
      let b0 = loadB4(0u, k); let b1 = loadB4(1u, k); let b2 = loadB4(2u, k); let b3 = loadB4(3u, k);
      let b4 = loadB4(4u, k); let b5 = loadB4(5u, k); let b6 = loadB4(6u, k); let b7 = loadB4(7u, k);
      accumulateRows(k, b0, b1, b2, b3, b4, b5, b6, b7);
    }
    storeRows(m0, n);
    return;
  }

  if (A_SHUFFLE) {
    accumulateShuffledRows(lane, n, K, kStride);
    storeRows(m0, n);
    return;
  }

  for (var k = 0u; k < K; k++) {
    if (B_K_CONTIGUOUS) {
      let lo = loadColumnsOfB(k, n);
      let hi = loadColumnsOfB(k, n + 4u);
      accumulate(k, kStride, lo, hi, lo, hi);
    } else if (OUT_SWIGLU) {
      accumulate(k, kStride, loadRowOfB(k, n, 0u), loadRowOfB(k, n + 4u, 0u),
          loadRowOfB(k, n, N), loadRowOfB(k, n + 4u, N));
    } else {
      let lo = loadRowOfB(k, n, 0u);
      let hi = loadRowOfB(k, n + 4u, 0u);
      accumulate(k, kStride, lo, hi, lo, hi);
    }
  }

  storeRows(m0, n);
}
