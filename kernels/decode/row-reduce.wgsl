// decode row reductions: the workgroup scratch and tree reductions of the one-workgroup-per-row decode kernels
// (sample, top-logprobs, logits-processors), prepended by their launchers. WG is the including kernel's workgroup
// size; its lane 0 sets treeStart = WG / 2 at the row's start. Call these from uniform control flow: each returns a
// workgroup-uniform value (loop bounds and branches downstream depend on it) and may be called many times a row,
// which util/workgroup-sum.wgsl's sum (one call per entry point, a tree the compiler unrolls) does not allow.

var<workgroup> reduceValue: array<f32, WG>;
var<workgroup> reduceIndex: array<u32, WG>;
// WG / 2, the reduction trees' first stride, read back through workgroup memory: a loop bound the shader
// compiler cannot fold keeps each tree a loop. Unrolled, LLVM inlines every level's barrier at each of the six
// reductions, and lavapipe compiled sample's wg256 in 6-10 s (1.5-1.8 s rolled); a GPU pays a few instructions a
// level.
var<workgroup> treeStart: u32;

fn workgroupSum(lid: u32, value: f32) -> f32 {
  reduceValue[lid] = value;
  // The uniform load is also the barrier that publishes the stores above.
  for (var stride = workgroupUniformLoad(&treeStart); stride > 0u; stride >>= 1u) {
    if (lid < stride) { reduceValue[lid] += reduceValue[lid + stride]; }
    workgroupBarrier();
  }
  let total = workgroupUniformLoad(&reduceValue[0]);
  workgroupBarrier();
  return total;
}

fn workgroupMax(lid: u32, value: f32) -> f32 {
  reduceValue[lid] = value;
  for (var stride = workgroupUniformLoad(&treeStart); stride > 0u; stride >>= 1u) {
    if (lid < stride) { reduceValue[lid] = max(reduceValue[lid], reduceValue[lid + stride]); }
    workgroupBarrier();
  }
  let total = workgroupUniformLoad(&reduceValue[0]);
  workgroupBarrier();
  return total;
}
