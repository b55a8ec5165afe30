// rope: HF rotary position embedding (rotate_half layout), in place on the q and k heads of the fused qkv buffer:
// row r's heads h < NH + NKV start at qkv[r * rowStride + colOffset + h * HS]; v heads are never touched.
//   angle[r, i] = f32(positions[r]) * invFreq[i], invFreq[i] = 1 / theta^(2i / HS) (f32, from the host), i < HS/2
//   y[d] = x[d] * cos - x[d + HS/2] * sin;  y[d + HS/2] = x[d + HS/2] * cos + x[d] * sin     (d < HS/2)
//   sinSign = +1 is the forward, -1 the backward (the transpose of a rotation is the rotation by -angle).
// v1: one lane per (row, vecN of the half head) (vec4 when HS/2, rowStride and colOffset are multiples of 4):
//    cos and sin once, then every head of the row in a loop.

const WG = 64u;

// reduceAngle comes from rope-angle.wgsl.

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let half = params.HS / 2u / VW;
  let idx = gid.x + gid.y * nwg.x * WG;
  if (idx >= params.rows * half) { return; }
  let row = idx / half;
  let i = idx % half;
  let angle = reduceAngle(f32(positions[row]) * invFreq[i]);
  let c = cos(angle);
  let s = params.sinSign * sin(angle);
  let first = (row * params.rowStride + params.colOffset) / VW + i;
  for (var h = 0u; h < params.heads; h++) {
    let at = first + h * 2u * half;
    let x1 = qkv[at];
    let x2 = qkv[at + half];
    qkv[at] = x1 * c - x2 * s;
    qkv[at + half] = x2 * c + x1 * s;
  }
}
