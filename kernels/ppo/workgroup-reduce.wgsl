// Shared snippet (no bindings): deterministic reductions across one workgroup, prepended to the sources
// of the PPO row kernels. `width` is the workgroup size (at most 256); callers must reach
// these from uniform control flow.

var<workgroup> reduceScratch: array<vec4<f32>, 256>;

// Lane 0 adds the `width` partials in lane order, not a tree: on lavapipe each barrier is a coroutine switch of
// the whole workgroup, and LLVM compiled a log2(width)-level tree at three barriers a level (policy-loss: 8.0 s
// on an empty shader cache against 2.6 s this way, same run); a few hundred adds by one lane cost a GPU little.
fn workgroupSum4(lid: u32, width: u32, value: vec4<f32>) -> vec4<f32> {
  reduceScratch[lid] = value;
  workgroupBarrier();
  if (lid == 0u) {
    var total = reduceScratch[0];
    for (var i = 1u; i < width; i = i + 1u) { total = total + reduceScratch[i]; }
    reduceScratch[0] = total;
  }
  workgroupBarrier();
  let total = reduceScratch[0];
  workgroupBarrier();
  return total;
}

fn workgroupMax(lid: u32, width: u32, value: f32) -> f32 {
  reduceScratch[lid].x = value;
  workgroupBarrier();
  if (lid == 0u) {
    var total = reduceScratch[0].x;
    for (var i = 1u; i < width; i = i + 1u) { total = max(total, reduceScratch[i].x); }
    reduceScratch[0].x = total;
  }
  workgroupBarrier();
  let total = reduceScratch[0].x;
  workgroupBarrier();
  return total;
}

// verl's agg_loss weight d loss / d loss_mat[b, t]: `scale` is dp_size / (global tokens or global sequences),
// or 1 / loss_scale_factor; seq-mean-token-mean (mode 2) also divides by the row's token count.
fn aggWeight(mode: u32, scale: f32, mask: f32, rowCount: f32) -> f32 {
  if (mask == 0.0) { return 0.0; }
  return mask * scale * select(1.0, 1.0 / (rowCount + 1e-8), mode == 2u);
}
