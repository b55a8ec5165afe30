// clear-ranges: data[i] = 0 for i in each [start, end) of ranges      data (n), ranges (count, 2) u32 offsets in vecN
// Many small zero-fills of one binding in one dispatch, where each engine.clear would be a command of its own
// (LoRA's off-block Bᵀ gradients: one range per adapter row, ~40 per layer at rank 8).
// v1: one workgroup per range, its 64 lanes striding over it in vecN stores (vec4 when every range's ends are
//    multiples of 4: a quarter of the stores, each ~12 instructions on lavapipe); workgroups folded into y.

const WG = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lane: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= params.count) { return; }
  let end = ranges[2u * r + 1u];
  for (var i = ranges[2u * r] + lane; i < end; i += WG) {
    data[i] = vecN(0.0);
  }
}
