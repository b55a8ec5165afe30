// matmul: out[M, N] = alpha·op(A)·op(B) (+ bias[N]) (+ out), one dispatch with bias and accumulate fused.
//   nn: A [M, K], B [K, N]   (dx = dy·W)
//   nt: A [M, K], B [N, K]   (y = x·Wᵀ, W in Hugging Face [out, in] layout)
//   tn: A [K, M], B [K, N]   (dW = dyᵀ·x)
// Variants (kernels/matmul/matmul.ts picks: cpu on software devices, gpu elsewhere):
//   tiled (this file): 64x64 output tile per workgroup of 64 lanes, 8x8 outputs per lane in registers, K in
//     steps of 32 through workgroup tiles stored k-major, so the inner loop reads 4 vec4s per 64 FMAs in every
//     layout; global loads are vec4 when the operand's rows are a multiple of 4 floats, scalars otherwise.
//   register (matmul-register.wgsl): 8 lanes, 8x64 tile, no workgroup memory; A loads shared by the SIMD vector.
//   cpu: register for nn and tn, tiled for nt.
//   gpu (matmul-gpu.wgsl): 16x16 invocations, 128x128 or 64x64 tiles, 8x8 or 4x4 outputs per invocation.
//   naive (matmul-naive.wgsl): one output per lane; the baseline.
// B may be float32 or half precision (a frozen model's bf16/f16 weights): every variant reads B through
// bElement/bQuad (matmul-b-f32.wgsl, matmul-b-half.wgsl), which unpack halves to float32.
// Layout constants, bindings and the epilogue: matmul-common.wgsl; B's loads (bElement, bQuad): matmul-b-*.wgsl;
// the tile loads (loadA, loadB): matmul-tile-loads.wgsl.

const TILE_M = 64u;
const TILE_N = 64u;
const TILE_K = 32u;
const LANES = 64u;

// [k][m] and [k][n], 16 vec4s per k.
var<workgroup> tileA: array<vec4<f32>, TILE_K * TILE_M / 4u>;
var<workgroup> tileB: array<vec4<f32>, TILE_K * TILE_N / 4u>;

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
    // A loop the compiler cannot unroll (it starts at the lane index): unrolled, lavapipe's code for the
    // loads spills the accumulators.
    for (var slot = lane; slot < TILE_K * 64u / 4u; slot += LANES) {
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
      // Written out: lavapipe keeps acc in registers only when every index is a literal constant.
      acc[0] += a0.x * b0; acc[1] += a0.x * b1;
      acc[2] += a0.y * b0; acc[3] += a0.y * b1;
      acc[4] += a0.z * b0; acc[5] += a0.z * b1;
      acc[6] += a0.w * b0; acc[7] += a0.w * b1;
      acc[8] += a1.x * b0; acc[9] += a1.x * b1;
      acc[10] += a1.y * b0; acc[11] += a1.y * b1;
      acc[12] += a1.z * b0; acc[13] += a1.z * b1;
      acc[14] += a1.w * b0; acc[15] += a1.w * b1;
    }
    workgroupBarrier();
  }

  storeBlock(m0 + laneRow * 8u, n0 + laneCol * 8u, acc);
}
