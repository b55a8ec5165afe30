// from-half: bf16 or f16 values (n), two per word, element 2i in the low half → float32 values (n), exactly (every
// half value is a float32 one). Reads back what to-half stored: a mixed-precision trunk's half-precision layer inputs
// (models/decoder.ts), unpacked into the float32 buffer the layer's kernels read.
// v1: one lane per input word, 256 lanes per workgroup; an odd n leaves the last word's high half unread.
// The launcher prepends `unpackPair(w: u32) -> vec2<f32>` for the dtype (kernels/util/half-weights.ts).

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let word = gid.x + gid.y * nwg.x * 256u;
  let n = params.n;
  if (2u * word >= n) { return; }
  let pair = unpackPair(halves[word]);
  values[2u * word] = pair.x;
  if (2u * word + 1u < n) { values[2u * word + 1u] = pair.y; }
}
