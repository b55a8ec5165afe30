// matmul's global-to-tile loads, shared by the variants that stage operands in workgroup memory (tiled, gpu):
// four consecutive elements of A or B, zero outside the operand, as one vec4 load when the operand's rows split
// into whole vec4s (A_VEC4, B_VEC4), else four scalar loads.

// Four consecutive floats of a row-major [rows, cols] operand starting at (row, col), zero outside it.
// Branch-free (out-of-range lanes read element 0 and discard it): lavapipe runs divergent branches masked,
// paying for both sides. A's rows are params.aStride apart from element params.aOffset on (a window of its columns
// when the launcher splits the weight's rows; A_VEC4 only when both are multiples of 4).
fn loadA(row: u32, col: u32, rows: u32, cols: u32) -> vec4<f32> {
  let start = params.aOffset + row * params.aStride + col;
  if (A_VEC4) {
    let inside = row < rows && col < cols;
    return select(vec4<f32>(0.0), a4[select(0u, start / 4u, inside)], inside);
  }
  var v: vec4<f32>;
  for (var j = 0u; j < 4u; j++) {
    let inside = row < rows && col + j < cols;
    let at = select(0u, start + j, inside);
    v[j] = select(0.0, a[at], inside);
  }
  return v;
}

// loadA's twin for b, whose rows are contiguous (WGSL cannot pass a storage array to a function portably).
fn loadB(row: u32, col: u32, rows: u32, cols: u32) -> vec4<f32> {
  let start = row * cols + col;
  if (B_VEC4) {
    let inside = row < rows && col < cols;
    return select(vec4<f32>(0.0), bQuad(select(0u, start / 4u, inside)), inside);
  }
  var v: vec4<f32>;
  for (var j = 0u; j < 4u; j++) {
    let inside = row < rows && col + j < cols;
    let at = select(0u, start + j, inside);
    v[j] = select(0.0, bElement(at), inside);
  }
  return v;
}
