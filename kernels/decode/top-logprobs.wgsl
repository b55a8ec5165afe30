// top-logprobs: the K most likely next tokens of each row and their log-probs, for a server's top-N log-probs
// (OpenAI's logprobs: N / top_logprobs, SGLang's top_logprobs_num). Dispatched before `sample` on the same logits,
// so it writes the column the sampler is about to fill.
//   logits (rows, V): a window of rows [firstRow, …) when all are above one binding (the others indexed from firstRow)
//   rowSampling (B, 6) u32 as sample.wgsl reads it: outRow (word 1) and temperature (word 3)
//   steps, finished (B): the column of this step; a finished row, or one whose step reached outStride, writes nothing
//   topIds, topLogprobs (outRows, outStride, K) ← at (outRow, step): the K tokens of the largest logits (ties: the
//     lowest index first, torch.topk's order on a sorted tie) and log_softmax(logits / temperature) of each
//     (temperature 1 when greedy), the distribution whose log-prob the sampler writes for the token it draws
// v1: one workgroup of WG lanes per row; the K passes of row-top-k.wgsl.

override WG: u32 = 256u;

// reduceValue, reduceIndex, treeStart, workgroupSum: row-reduce.wgsl; rowTopK: row-top-k.wgsl (both prepended).
var<workgroup> rowSkipped: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = params.firstRow + wid.x;
  let step = steps[row];
  if (lid == 0u) {
    rowSkipped = select(finished[row], 1u, step >= params.outStride);
    treeStart = WG / 2u;
  }
  if (workgroupUniformLoad(&rowSkipped) != 0u) { return; }
  let temperature = bitcast<f32>(rowSampling[row * 6u + 3u]);
  let invTemperature = select(1.0 / temperature, 1.0, temperature <= 0.0);
  let out = (rowSampling[row * 6u + 1u] * params.outStride + step) * params.K;
  rowTopK(lid, wid.x * params.V, out, params.K, invTemperature);
}
