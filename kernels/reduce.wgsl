// workgroupSum: the fixed-shape tree sum of one value per lane over a 256-lane workgroup, prepended by reduce.ts
// to the reduction kernels (weighted-sum.wgsl, sum-squares.wgsl). Same inputs, same bits: the order of the
// additions never depends on timing, and no float atomics are needed.

const LANES = 256u;
var<workgroup> laneSums: array<f32, 256>;

// Every lane must call it (it contains barriers); every lane gets the total.
fn workgroupSum(lane: u32, value: f32) -> f32 {
  laneSums[lane] = value;
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
    if (lane < stride) { laneSums[lane] = laneSums[lane] + laneSums[lane + stride]; }
    workgroupBarrier();
  }
  return laneSums[0];
}
