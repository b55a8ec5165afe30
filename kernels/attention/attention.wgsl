// attention: causal grouped-query attention (FlashAttention-2 style), shared prelude of the forward, dq and dkdv
// kernels (attention-forward.wgsl, attention-backward-dq.wgsl, attention-backward-dkdv.wgsl; the launcher
// prepends this file to each, with attention-key-tile.wgsl for forward and dq and attention-dout.wgsl for dq and
// dkdv). Shapes: q(b,t,h,d) for t < Tq, k/v(b,j,g,d) for j < Tk, read through strided
// views so they can live in the fused qkv buffer [B*T, (NH+2*NKV)*HS] or in a KV cache; keyMask [B, Tk] u32.
// Query t is at key position queryStart + t and attends key j iff j <= queryStart + t and keyMask[b, j] == 1;
// head h reads kv group g = h / (NH/NKV). Softmax runs in the exp2 domain (scores pre-multiplied by log2 e).
// Head vectors live in registers and workgroup tiles as vec4 (HS padded with zeros to 4*HS4, HS <= 128);
// global reads are scalar because the strided views need not be 16-byte aligned.
// Each row a workgroup owns (a query, or a key for dk/dv) is held by L consecutive lanes (the launcher prepends
// `const L`: 1 on CPU devices and for heads of up to 32; 2 or 4 on GPUs for wider heads, so a lane's private head
// vectors stay at D4 <= 8 vec4s instead of 32: at HS = 128 the dkdv pass's k, v, dk and dv rows were 512 floats a
// lane, past any GPU's register file). Lane part p of a row holds vec4s p, p + L, ... (D4 = HS4 / L of them; adjacent
// lanes read adjacent vec4s of a tile row), and rowSum (prepended with L: the identity for L = 1, a subgroup
// butterfly for L > 1, the same bits in each of the L lanes) completes a dot product across them. Every pass calls
// rowSum in uniform control flow: dot products are computed for every staged row and only their use is masked.

// A finite "minus infinity": rows with no allowed key keep every subtraction and exp2 free of NaN.
const NEG_BIG: f32 = -1.0e30;
const LOG2E: f32 = 1.4426950408889634;
// HS itself is a const the launcher prepends (`const HS: u32 = 32u;`), not an override: per-lane head vectors
// are private arrays, whose length WGSL only accepts as a const.
const HS4: u32 = (HS + 3u) / 4u;
const D4: u32 = HS4 / L;
// The loops over a lane's D4 vec4s run to headVec4s(), which the launcher prepends per head size and device:
//   unrolled: `return D4;`, a constant trip count, so the compiler unrolls them and keeps the head vectors in
//     registers (GPUs; CPU devices up to HS = 64, where that runs 1.7-2.3x faster on lavapipe);
//   rolled: `return params.hs4;` (L = 1 only), unknown to the compiler, so the loops stay loops (CPU devices above HS =
//   64:
//     as fast there, and lavapipe's LLVM compiled the unrolled HS = 128 kernels for minutes, every vec4
//     component a separate value saved and restored at each barrier, on every fresh machine). Rows of the other operand
//     staged per workgroup tile (keys for forward/dq, queries for dkdv).
override TILE: u32;

fn qBase(b: u32, t: u32, h: u32) -> u32 {
  return params.qColOffset + (b * params.Tq + t) * params.qRowStride + h * HS;
}

fn kBase(b: u32, j: u32, g: u32) -> u32 {
  return params.kColOffset + b * params.kvBatchStride + j * params.kRowStride + g * HS;
}

fn vBase(b: u32, j: u32, g: u32) -> u32 {
  return params.vColOffset + b * params.kvBatchStride + j * params.vRowStride + g * HS;
}

fn kvGroup(h: u32) -> u32 {
  return h / (params.NH / params.NKV);
}

fn keyVisible(b: u32, j: u32) -> bool {
  return keyMask[b * params.maskBatchStride + j] == 1u;
}

// Elements 4*d4 .. 4*d4+3 of a head vector, zero past HS (the branch is uniform: d4 is the same in every lane).
fn loadQ(base: u32, d4: u32) -> vec4<f32> {
  let d = base + 4u * d4;
  if (4u * d4 + 4u <= HS) { return vec4<f32>(q[d], q[d + 1u], q[d + 2u], q[d + 3u]); }
  let n = HS - 4u * d4;
  return vec4<f32>(q[d], select(0.0, q[d + 1u], n > 1u), select(0.0, q[d + 2u], n > 2u), 0.0);
}

fn loadK(base: u32, d4: u32) -> vec4<f32> {
  let d = base + 4u * d4;
  if (4u * d4 + 4u <= HS) { return vec4<f32>(k[d], k[d + 1u], k[d + 2u], k[d + 3u]); }
  let n = HS - 4u * d4;
  return vec4<f32>(k[d], select(0.0, k[d + 1u], n > 1u), select(0.0, k[d + 2u], n > 2u), 0.0);
}

fn loadV(base: u32, d4: u32) -> vec4<f32> {
  let d = base + 4u * d4;
  if (4u * d4 + 4u <= HS) { return vec4<f32>(v[d], v[d + 1u], v[d + 2u], v[d + 3u]); }
  let n = HS - 4u * d4;
  return vec4<f32>(v[d], select(0.0, v[d + 1u], n > 1u), select(0.0, v[d + 2u], n > 2u), 0.0);
}

fn sum4(x: vec4<f32>) -> f32 {
  return x.x + x.y + x.z + x.w;
}
