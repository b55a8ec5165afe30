// Shared snippet (no bindings), prepended by rowwise.ts's withWorkgroupSum: a tree sum of one f32 per lane across
// a workgroup of WG lanes (a power of two, declared by the including shader), always in the same order, so the same
// inputs give the same bits on every run (no float atomics). Every lane must call it from uniform control flow and
// gets the total. It leaves the total in laneSums: one call per entry point, or a barrier before the next.

var<workgroup> laneSums: array<f32, WG>;

fn workgroupSum(lane: u32, value: f32) -> f32 {
  laneSums[lane] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { laneSums[lane] += laneSums[lane + stride]; }
    workgroupBarrier();
  }
  return laneSums[0];
}
