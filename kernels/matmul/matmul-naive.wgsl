// matmul (naive): one output per lane, every operand element loaded from global memory (the baseline the
// benchmark compares against, and the fallback). Shapes and layouts as in matmul.wgsl; 16x16 lanes.

// Layout constants, bindings and the epilogue: matmul-common.wgsl.

@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m = gid.y;
  let n = gid.x;
  if (m >= params.M || n >= params.N) { return; }
  var sum = 0.0;
  for (var k = 0u; k < params.K; k++) {
    var x: f32;
    var y: f32;
    // A's rows are aStride apart from element aOffset on (a window of its columns: the launcher's weight windows).
    if (A_K_CONTIGUOUS) { x = a[params.aOffset + m * params.aStride + k]; }
    else { x = a[params.aOffset + k * params.aStride + m]; }
    if (B_K_CONTIGUOUS) { y = bElement(n * params.K + k); } else { y = bElement(k * params.N + n); }
    sum += x * y;
  }
  storeOutput(m, n, sum);
}
