// kv-cache-unpack: slots [0, Tk) of B sequences of a half-precision KV cache as float32, for the general attention
// kernels (kernels/attention, float32 keys and values): a prefill or a multi-token append attends the cache
// through this copy, one layer at a time.
//   kCache, vCache (≥ B, capacity, NKV·HS) bf16/f16 pairs (kv-cache-access.ts's loadK/loadV, prepended)
//   k, v (B, Tk, NKV·HS) float32: slot j of sequence b at (b·Tk + j)·NKV·HS
// v1: one lane per vec4 of a slot, k and v, 256 lanes, workgroups folded into y.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * 256u;
  let width = params.kvWidth / 4u;
  if (idx >= params.rows * params.Tk * width) { return; }
  let slotRow = idx / width;
  let b = slotRow / params.Tk;
  let at = (b * params.capacity + slotRow % params.Tk) * width + idx % width;
  k[idx] = loadK(at);
  v[idx] = loadV(at);
}
