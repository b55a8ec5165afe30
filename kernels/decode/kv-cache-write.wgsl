// kv-cache-write: copies the k and v sections of new rows of the fused qkv buffer into a layer's KV cache.
//   qkv (B·Tnew, W), W = (NH + 2·NKV)·HS: k at columns [NH·HS, (NH+NKV)·HS), v after it
//   kCache, vCache (B, capacity, NKV·HS): row (b, t) lands in slot slotStart + t of sequence b; a window of a row's
//     slots [slotBase, slotBase + capacity) where that row's layer is above a binding (B = 1, one dispatch a window)
// The cache is float32 or half precision (rounded to nearest even when stored): the launcher prepends
// kv-cache-access.ts's storeK/storeV for its storage.
// Inference only (rollout): nothing back-propagates through the cache.
// v1: one lane per vecN of a k row (vec4 when NKV·HS % 4 == 0; then every column offset is one too), writing
//     k and v, 256 lanes, workgroups folded into y.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * 256u;
  let width = params.kvWidth / VW;
  if (idx >= params.rows * params.Tnew * width) { return; }
  let column = idx % width;
  let newRow = idx / width;
  let b = newRow / params.Tnew;
  let t = newRow % params.Tnew;
  let kAt = newRow * (params.W / VW) + params.kColumn / VW + column;
  // A cache window (bound from slot slotBase, capacity slots) takes only the new rows that land in it.
  let slot = params.slotStart + t;
  if (slot < params.slotBase || slot >= params.slotBase + params.capacity) { return; }
  let slotAt = (b * params.capacity + slot - params.slotBase) * width + column;
  storeK(slotAt, qkv[kAt]);
  storeV(slotAt, qkv[kAt + width]);
}
