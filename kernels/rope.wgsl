// rope: HF rotary position embedding (rotate_half layout), in place on the q and k heads of the fused qkv buffer:
// row r's heads h < NH + NKV start at qkv[r * rowStride + colOffset + h * HS]; v heads are never touched.
//   angle[r, i] = f32(positions[r]) * invFreq[i], invFreq[i] = 1 / theta^(2i / HS) (f32, from the host), i < HS/2
//   y[d] = x[d] * cos - x[d + HS/2] * sin;  y[d + HS/2] = x[d + HS/2] * cos + x[d] * sin     (d < HS/2)
//   sinSign = +1 is the forward, -1 the backward (the transpose of a rotation is the rotation by -angle).
// v1: one lane per (row, vecN of the half head) (vec4 when HS/2, rowStride and colOffset are multiples of 4):
//    cos and sin once, then every head of the row in a loop.

const WG = 64u;

// 2π split so that k * TWO_PI_HI and k * TWO_PI_MID are exact in f32 for |k| < 2^16 (8 significant bits each).
const TWO_PI_HI = 6.28125;
const TWO_PI_MID = 0.00193023681640625;
const TWO_PI_LO = 5.070363386e-6;

// Angle reduced to [-π, π]. GPU sin/cos are only specified to absolute error 2^-11 on [-π, π] and degrade far
// outside it, while angles reach position * 1 radian; reducing with a three-part 2π keeps positions up to ~400k
// accurate to f32 rounding.
fn reduceAngle(a: vecN) -> vecN {
  let k = round(a * 0.15915494309189535);
  return ((a - k * TWO_PI_HI) - k * TWO_PI_MID) - k * TWO_PI_LO;
}

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
