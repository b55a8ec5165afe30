// attention (register): shared prelude of the CPU-device attention passes (attention-register-forward.wgsl,
// attention-register-dq.wgsl, attention-register-dkdv.wgsl; the launcher prepends this file to each). The math and
// shapes are attention.wgsl's (causal grouped-query attention, key mask, exp2 domain); the layout follows the
// register matmul (matmul-register.wgsl): a workgroup is 8 lanes in one subgroup (the launcher asks for subgroups
// of at least 8; lane = subgroup invocation id; on lavapipe one 256-bit SIMD vector), no workgroup memory, no
// barriers. Each lane owns ROWS rows of one operand ("own": queries for forward and dq, keys for dk/dv), kept in
// private arrays, and the workgroup walks the other operand 8 rows at a time ("shared" rows): lane l loads shared
// row l, one vec4 per 4 head elements, and subgroupBroadcast hands every row to every lane. On lavapipe a storage
// load costs the same for one address as for eight, so that is one load where reading the 8 rows in every lane took
// 8 (the passes ran 1.3-1.8x faster for it); a block of 8 keys also takes one online-softmax rescale instead of 8.
// ROWS = 2: 8 rows a lane ran ~10% faster, but LLVM took 40 s of CPU to compile the three passes (4 rows: 14 s;
// 2 rows: 5 s, against 13 s for the tiled passes at the attention test's five head sizes).
// Lane l's own row i is row i*8 + l of the workgroup's block of BLOCK rows: every lane gets rows from the whole
// block, so the causal limit trims them alike, and own rows i that the current shared block cannot see at all
// (near the diagonal) skip their work.
// Operands are bound as vec4 (HS, every stride and offset a multiple of 4; the launcher checks). The head size is
// a uniform (params.hs4 vec4s), not a constant: one pipeline per pass serves every head size up to 128, and the
// head-vector loops stay loops. Private per-row arrays hold MAX_HS4 vec4s a row.

const ROWS: u32 = 2u;
const LANES: u32 = 8u;
/** Own rows per workgroup. */
const BLOCK: u32 = ROWS * LANES;
const MAX_HS4: u32 = 32u;
// A finite "minus infinity": rows with no allowed key keep every subtraction and exp2 free of NaN.
const NEG_BIG: f32 = -1.0e30;
const LOG2E: f32 = 1.4426950408889634;

// scores[2i], scores[2i + 1]: own row i against shared rows 0..3 and 4..7. Indexed by literals only (after
// inlining), so they stay in registers, as do the other per-row arrays of ROWS.
var<private> scores: array<vec4<f32>, 2u * ROWS>;
// The backward's second block, dP = dOut·v, laid out like scores.
var<private> dpScores: array<vec4<f32>, 2u * ROWS>;
// Whether own row i meets the current shared block at all.
var<private> rowActive: array<bool, ROWS>;
var<private> lane: u32;

/** rowActive for own query rows from `first` (forward, dq): row i has a query (the block's first, first + 8i,
 *  is below Tq) and its last query sees key j0. */
fn activateQueryRows(first: u32, j0: u32) {
  let last = params.queryStart + first + LANES - 1u;
  rowActive[0] = first < params.Tq && last >= j0;
  rowActive[1] = first + 8u < params.Tq && last + 8u >= j0;
}

/** rowActive for own key rows from `first` (dk, dv): row i has a key (first + 8i is below Tk) and its first key is
 *  seen by query t0 + 7. */
fn activateKeyRows(first: u32, t0: u32) {
  let seen = params.queryStart + t0 + LANES - 1u;
  rowActive[0] = first < params.Tk && first <= seen;
  rowActive[1] = first + 8u < params.Tk && first + 8u <= seen;
}

/** q(b, t, h) as a vec4 index. */
fn qOffset(b: u32, t: u32, h: u32) -> u32 {
  return (params.qColOffset + (b * params.Tq + t) * params.qRowStride) / 4u + h * params.hs4;
}

/** k(b, j, g) or v(b, j, g) as a vec4 index, given k's or v's column offset and row stride. */
fn kvOffset(b: u32, j: u32, g: u32, colOffset: u32, rowStride: u32) -> u32 {
  return (colOffset + b * params.kvBatchStride + j * rowStride) / 4u + g * params.hs4;
}

/** Row of out/dOut [B*Tq, NH*HS] as a vec4 index. */
fn outOffset(b: u32, t: u32, h: u32) -> u32 {
  return ((b * params.Tq + t) * params.NH + h) * params.hs4;
}

fn kvGroup(h: u32) -> u32 {
  return h / (params.NH / params.NKV);
}

fn keyVisible(b: u32, j: u32) -> bool {
  return j < params.Tk && keyMask[b * params.maskBatchStride + min(j, params.Tk - 1u)] == 1u;
}

/** Each lane's x, in every lane: rows[l] is lane l's. */
fn shareRows(x: vec4<f32>) -> array<vec4<f32>, 8> {
  return array<vec4<f32>, 8>(
      subgroupBroadcast(x, 0u), subgroupBroadcast(x, 1u), subgroupBroadcast(x, 2u), subgroupBroadcast(x, 3u),
      subgroupBroadcast(x, 4u), subgroupBroadcast(x, 5u), subgroupBroadcast(x, 6u), subgroupBroadcast(x, 7u));
}

/** Keys j0 .. j0+7 visible (in range and not padding), as two vec4 masks; lane l reads key j0 + l. */
fn sharedKeysVisible(b: u32, j0: u32) -> array<vec4<bool>, 2> {
  let mine = select(0u, 1u, keyVisible(b, j0 + lane));
  let lo = vec4<u32>(subgroupBroadcast(mine, 0u), subgroupBroadcast(mine, 1u), subgroupBroadcast(mine, 2u),
      subgroupBroadcast(mine, 3u));
  let hi = vec4<u32>(subgroupBroadcast(mine, 4u), subgroupBroadcast(mine, 5u), subgroupBroadcast(mine, 6u),
      subgroupBroadcast(mine, 7u));
  return array<vec4<bool>, 2>(lo == vec4<u32>(1u), hi == vec4<u32>(1u));
}

fn dots(x: vec4<f32>, u0: vec4<f32>, u1: vec4<f32>, u2: vec4<f32>, u3: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(dot(x, u0), dot(x, u1), dot(x, u2), dot(x, u3));
}

/** block[own row i] += x · u[c] for the 8 shared rows, x being own row i's elements 4d4 .. 4d4+3. */
fn accumulateScores(block: ptr<private, array<vec4<f32>, 2u * ROWS>>, i: u32, x: vec4<f32>, u: array<vec4<f32>, 8>) {
  if (!rowActive[i]) { return; }
  (*block)[2u * i] += dots(x, u[0], u[1], u[2], u[3]);
  (*block)[2u * i + 1u] += dots(x, u[4], u[5], u[6], u[7]);
}

/** Σ_c w[own row i][c] · u[c] over the 8 shared rows. */
fn combine(w: ptr<private, array<vec4<f32>, 2u * ROWS>>, i: u32, u: array<vec4<f32>, 8>) -> vec4<f32> {
  let lo = (*w)[2u * i];
  let hi = (*w)[2u * i + 1u];
  return lo.x * u[0] + lo.y * u[1] + lo.z * u[2] + lo.w * u[3] + hi.x * u[4] + hi.y * u[5] + hi.z * u[6] + hi.w * u[7];
}

/** scores = the own query rows `own` (qs[i * MAX_HS4 + d4]) · the shared block of 8 keys, lane l's from kRow
 *  (forward and dq). */
fn queryKeyScores(own: ptr<private, array<vec4<f32>, ROWS * MAX_HS4>>, kRow: u32) {
  scores = array<vec4<f32>, 2u * ROWS>();
  for (var d4 = 0u; d4 < params.hs4; d4++) {
    let u = shareRows(k[kRow + d4]);
    accumulateScores(&scores, 0u, (*own)[d4], u);
    accumulateScores(&scores, 1u, (*own)[MAX_HS4 + d4], u);
  }
}

/** Which of keys j0 .. j0+7 the query at `position` attends: visible (sharedKeysVisible) and not after it. */
fn queryAttends(visible: array<vec4<bool>, 2>, j0: u32, position: u32) -> array<vec4<bool>, 2> {
  let seen = vec4<u32>(position);
  return array<vec4<bool>, 2>(visible[0] & (vec4<u32>(j0) + vec4<u32>(0u, 1u, 2u, 3u) <= seen),
                              visible[1] & (vec4<u32>(j0) + vec4<u32>(4u, 5u, 6u, 7u) <= seen));
}
