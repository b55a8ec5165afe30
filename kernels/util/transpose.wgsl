// transpose: out (cols, rows) = x (rows, cols)ᵀ                 x (rows, cols), out (cols, rows)
// A weight W (N, K) becomes Wᵀ (K, N), so a linear layer's forward X·Wᵀ runs as the nn matmul X·(Wᵀ): on a CPU
// the register kernel's nn path is 1.5-2x faster than nt at the training shapes (models/decoder.ts).
// v1 block4 (rows and cols multiples of 4): one lane per 4x4 block, 4 vec4 loads along its rows and 4 vec4
//    stores along its columns, a quarter of the per-element loads (each one ~12 instructions on lavapipe);
//    consecutive lanes take consecutive blocks of a row of x, so the loads stream.
// v1 element (other shapes): one lane per element.
// 64 lanes per workgroup, workgroups folded into y.

const WG = 64u;

//// block4
@compute @workgroup_size(WG)
fn block4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * WG;
  let rows4 = params.rows / 4u;
  let cols4 = params.cols / 4u;
  if (idx >= rows4 * cols4) { return; }
  let r = idx / cols4;
  let c = idx % cols4;
  let x0 = x[(4u * r) * cols4 + c];
  let x1 = x[(4u * r + 1u) * cols4 + c];
  let x2 = x[(4u * r + 2u) * cols4 + c];
  let x3 = x[(4u * r + 3u) * cols4 + c];
  out[(4u * c) * rows4 + r] = vec4<f32>(x0.x, x1.x, x2.x, x3.x);
  out[(4u * c + 1u) * rows4 + r] = vec4<f32>(x0.y, x1.y, x2.y, x3.y);
  out[(4u * c + 2u) * rows4 + r] = vec4<f32>(x0.z, x1.z, x2.z, x3.z);
  out[(4u * c + 3u) * rows4 + r] = vec4<f32>(x0.w, x1.w, x2.w, x3.w);
}

//// element
@compute @workgroup_size(WG)
fn element(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * WG;
  if (idx >= params.rows * params.cols) { return; }
  let r = idx / params.cols;
  let c = idx % params.cols;
  out[c * params.rows + r] = x[idx];
}
