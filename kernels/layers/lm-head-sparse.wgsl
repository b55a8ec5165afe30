// lm-head-sparse: adds P (id, coef) pairs per row to one vocabulary chunk of d loss / d logits, in place, between the
//   fused backward's dlogits and its matmuls: logits (rows, width) holds columns [v0, v0 + width); pair p of row n
//   adds coefs[n, p] at column ids[n, p] when that falls in the chunk. A loss with terms on a few ids per position
//   beside the target's (on-policy distillation's top-k forward KL) enters the backward this way, with no (rows, V)
//   tensor of its own. v1: one thread per row, its pairs in order (a row's pairs may repeat an id).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
  let row = (wid.x + wid.y * nwg.x) * 64u + lane;
  if (row >= params.rows) { return; }
  for (var p = 0u; p < params.P; p++) {
    let id = ids[row * params.P + p];
    let coef = coefs[row * params.P + p];
    if (coef != 0.0 && id >= params.v0 && id < params.v0 + params.width) {
      logits[row * params.width + id - params.v0] += coef;
    }
  }
}
