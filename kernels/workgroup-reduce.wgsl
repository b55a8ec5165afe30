// Shared snippet (no bindings): deterministic tree reductions across one workgroup, prepended to the sources
// of the PPO row kernels. `width` is the workgroup size (a power of two, at most 256); callers must reach
// these from uniform control flow.

var<workgroup> reduceScratch: array<vec4<f32>, 256>;

fn workgroupSum4(lid: u32, width: u32, value: vec4<f32>) -> vec4<f32> {
  reduceScratch[lid] = value;
  workgroupBarrier();
  for (var stride = width / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) { reduceScratch[lid] = reduceScratch[lid] + reduceScratch[lid + stride]; }
    workgroupBarrier();
  }
  let total = reduceScratch[0];
  workgroupBarrier();
  return total;
}

fn workgroupMax(lid: u32, width: u32, value: f32) -> f32 {
  reduceScratch[lid].x = value;
  workgroupBarrier();
  for (var stride = width / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) { reduceScratch[lid].x = max(reduceScratch[lid].x, reduceScratch[lid + stride].x); }
    workgroupBarrier();
  }
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
