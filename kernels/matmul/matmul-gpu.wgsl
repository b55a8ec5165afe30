// matmul (gpu): out[M, N] = alpha·op(A)·op(B) (+ bias[N]) (+ out) for nn, nt and tn, shapes and layouts as in
// matmul.wgsl; the variant a discrete GPU takes (kernels/matmul/matmul.ts: `gpu`, on devices that are not software).
//   A workgroup of 16x16 invocations owns a TILE x TILE output tile; each invocation holds LANE_SIDE x LANE_SIDE
//   outputs in registers: rows 4·(y + 16r) + i and columns 4·(x + 16c) + j (r, c < LANE_SIDE/4; i, j < 4), so
//   its operands are whole vec4s of the tiles. K goes in steps of TILE_K = 8 through workgroup tiles of A and B
//   stored k-major ([k][m], [k][n]); every step of k reads LANE_SIDE/2 vec4s for LANE_SIDE² FMAs.
//   wide (LANE_SIDE 8, 128x128 tiles): the launcher's choice when the output has at least 128 such tiles and
//     M, N >= 128.
//   narrow (LANE_SIDE 4, 64x64 tiles): smaller outputs (decode steps, a small model's layers), 4x the workgroups.
// Why it should be fast on a GPU (nobody here has timed it on one; lavapipe only checks that it is right):
//   - Loads per FMA. wide: 4 vec4 workgroup loads per 64 FMAs per invocation (16 FMAs per load, as in the
//     classic 128x128/8x8 SGEMM); narrow: 8. Within a 32-lane warp the A reads are 2 addresses (broadcast) and
//     the B reads 16 consecutive vec4s (256 bytes): no bank conflicts.
//   - Arithmetic intensity against L2/DRAM: a k-step of the tile loads (2·TILE)·8 floats for TILE²·8 FMAs:
//     32 FLOP per byte (wide), 16 (narrow). Global loads are vec4 where rows split into whole vec4s (one 16-byte
//     load, coalesced: a k-contiguous operand's 2 vec4s per row are 32 contiguous bytes, the other's 32 lanes
//     read 512 contiguous bytes).
//   - Occupancy: 256 invocations; workgroup memory 2 · 8 · (TILE + 4) floats = 8.4 KiB (wide) or 4.3 KiB
//     (narrow) of the 16 KiB every device allows, so registers bound occupancy: wide holds ~100 (64 accumulators,
//     16 operands) and fits 2 workgroups (16 warps) per 64K-register SM; two barriers per 8 k-steps (512 FMAs).
//   - The transposing stores of a k-contiguous operand (A in nn/nt, B in nt) go to k-rows padded by one vec4
//     (TILE + 4 floats, 4 mod 32 banks), so the 32 stores of a warp hit 32 distinct banks.
//   The `tiled` kernel it replaces on GPUs was shaped for lavapipe: 64 invocations (2 warps) per workgroup, the
//   whole 16 KiB of workgroup memory, and transposing stores 8 ways bank-conflicted (64-float k-rows).
// Subgroup matrices (chromium-experimental-subgroup-matrix) would replace the inner product; the webgpu package
// does not expose them on any adapter we run (docs/engine.md, GPU variants).
// Layout constants, bindings and the epilogue: matmul-common.wgsl; the tile loads: matmul-tile-loads.wgsl.

// Invocations per side of the workgroup.
const SIDE = 16u;
// Output rows (and columns) per invocation: 8 (wide) or 4 (narrow).
override LANE_SIDE: u32 = 8u;
override TILE = SIDE * LANE_SIDE;
// k per workgroup tile: two vec4s of a k-contiguous row.
const TILE_K = 8u;
// vec4s per k-row of a tile: TILE/4 and one of padding, which shifts consecutive k-rows by 4 banks.
override STRIDE = TILE / 4u + 1u;
override TILE_VEC4S = TILE_K * STRIDE;

var<workgroup> tileA: array<vec4<f32>, TILE_VEC4S>;
var<workgroup> tileB: array<vec4<f32>, TILE_VEC4S>;

// Stores v, four consecutive k from k of output row/column i, into a k-major tile.
fn scatterA(k: u32, i: u32, v: vec4<f32>) {
  for (var j = 0u; j < 4u; j++) { tileA[(k + j) * STRIDE + i / 4u][i % 4u] = v[j]; }
}

fn scatterB(k: u32, i: u32, v: vec4<f32>) {
  for (var j = 0u; j < 4u; j++) { tileB[(k + j) * STRIDE + i / 4u][i % 4u] = v[j]; }
}

@compute @workgroup_size(SIDE, SIDE)
fn main(@builtin(local_invocation_id) local: vec3<u32>, @builtin(local_invocation_index) lane: u32,
    @builtin(workgroup_id) wid: vec3<u32>) {
  let M = params.M;
  let N = params.N;
  let K = params.K;
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  // vec4s of rows (and of columns) per invocation; a constant once the pipeline fixes LANE_SIDE, so the loops
  // below unroll and acc's indices are constants.
  let quads = LANE_SIDE / 4u;
  // Row 4r + i of this invocation's block, column quad c: acc[(4r + i)·2 + c]. Sized for wide; narrow uses 4.
  var acc: array<vec4<f32>, 16>;

  for (var k0 = 0u; k0 < K; k0 += TILE_K) {
    // TILE·TILE_K/4 vec4s per operand: one per invocation (wide), one per two (narrow).
    for (var slot = lane; slot < TILE * TILE_K / 4u; slot += SIDE * SIDE) {
      if (A_K_CONTIGUOUS) {
        let m = slot / (TILE_K / 4u);
        let k = (slot % (TILE_K / 4u)) * 4u;
        scatterA(k, m, loadA(m0 + m, k0 + k, M, K));
      } else {
        let k = slot / (TILE / 4u);
        let m = slot % (TILE / 4u);
        tileA[k * STRIDE + m] = loadA(k0 + k, m0 + 4u * m, K, M);
      }
      if (B_K_CONTIGUOUS) {
        let n = slot / (TILE_K / 4u);
        let k = (slot % (TILE_K / 4u)) * 4u;
        scatterB(k, n, loadB(n0 + n, k0 + k, N, K));
      } else {
        let k = slot / (TILE / 4u);
        let n = slot % (TILE / 4u);
        tileB[k * STRIDE + n] = loadB(k0 + k, n0 + 4u * n, K, N);
      }
    }
    workgroupBarrier();
    for (var k = 0u; k < TILE_K; k++) {
      var a: array<vec4<f32>, 2>;
      var b: array<vec4<f32>, 2>;
      for (var q = 0u; q < quads; q++) {
        a[q] = tileA[k * STRIDE + local.y + SIDE * q];
        b[q] = tileB[k * STRIDE + local.x + SIDE * q];
      }
      for (var r = 0u; r < quads; r++) {
        for (var i = 0u; i < 4u; i++) {
          for (var c = 0u; c < quads; c++) {
            acc[(4u * r + i) * 2u + c] = fma(vec4<f32>(a[r][i]), b[c], acc[(4u * r + i) * 2u + c]);
          }
        }
      }
    }
    workgroupBarrier();
  }

  // Each store instruction of a warp writes 16 columns 4 apart of one row; its 4 instructions (j) fill 64
  // consecutive floats, which the cache merges.
  for (var r = 0u; r < quads; r++) {
    for (var i = 0u; i < 4u; i++) {
      let m = m0 + 4u * (local.y + SIDE * r) + i;
      for (var c = 0u; c < quads; c++) {
        for (var j = 0u; j < 4u; j++) {
          let n = n0 + 4u * (local.x + SIDE * c) + j;
          if (m < M && n < N) { storeOutput(m, n, acc[(4u * r + i) * 2u + c][j]); }
        }
      }
    }
  }
}
