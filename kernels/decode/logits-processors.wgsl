// logits-processors: a server's per-request sampling knobs applied in place to each row's logits before `sample`
// (vLLM's order): the repetition penalty over the row's prompt and generated tokens, presence and frequency
// penalties over the tokens the row's sample generated so far, logit_bias, EOS masked before min_tokens, then
// min_p. ignore_eos (vLLM's and SGLang's: generation goes on after an EOS) reopens a row that the sampler finished
// on an EOS id at the step before.
//   logits (B, V) modified in place (a window of rows [firstRow, …) when B rows are above one binding: the per-row
//     tensors are indexed from firstRow); rowProcessing (B, 8 + 2·MAX_BIAS) u32 per row: [minTokens, ignoreEos,
//     biasCount, bits(presence), bits(frequency), bits(minP), promptLength, bits(repetition), then biasCount
//     (token, bits(bias)) pairs]
//   rowSampling (B, 6) as sample.wgsl reads it: outRow (word 1), temperature (word 3)
//   tokens (outRows, outStride) the sampler's output so far: columns [0, steps[b]) are the sample's tokens
//   steps, finished (B): a finished row, or one past its budget, is left alone (the sampler pads it); finished is 1
//     when the sampler drew an EOS id (set back to 0 here for an ignore_eos row), 2 when the host ended the row
//   eosIds (numEos ≥ 1)
//   prompts (B, promptStride): columns [0, promptLength) are the row's prompt (promptLength 0 without repetition)
// A token of the prompt or the generated ones has its logit divided by the repetition penalty when positive, else
// multiplied (vLLM's); a generated token's logit then loses presence + frequency · count (count: its occurrences
// among the generated); min_p keeps the tokens
// whose probability at the row's temperature is at least minP times the largest: x ≥ max + T · log(minP) (off when
// greedy). Masked logits become the lowest finite f32, which `sample` never draws and whose probability is 0.
// v1: one workgroup of WG lanes per row; each distinct token of prompt ++ generated is penalised by the lane holding
//     its first occurrence (one writer per logit), phases separated by storage barriers.

override WG: u32 = 256u;

// reduceValue, treeStart and workgroupMax: row-reduce.wgsl, prepended by the launcher.
var<workgroup> rowSkipped: u32;

const LOWEST: f32 = -3.4028234e38;
const HEADER: u32 = 8u;

// Token j of the row's prompt followed by its generated tokens.
fn sequenceToken(row: u32, out: u32, promptLength: u32, j: u32) -> u32 {
  if (j < promptLength) { return prompts[row * params.promptStride + j]; }
  return tokens[out + j - promptLength];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = params.firstRow + wid.x;
  let step = steps[row];
  let p = row * params.rowWords;
  let ignoreEos = rowProcessing[p + 1u];
  if (lid == 0u) {
    var ended = finished[row];
    if (ended == 1u && ignoreEos != 0u) {
      ended = 0u;
      finished[row] = 0u;
    }
    rowSkipped = select(ended, 1u, step >= params.outStride);
    treeStart = WG / 2u;
  }
  if (workgroupUniformLoad(&rowSkipped) != 0u) { return; }
  let minTokens = rowProcessing[p];
  let biasCount = rowProcessing[p + 2u];
  let presence = bitcast<f32>(rowProcessing[p + 3u]);
  let frequency = bitcast<f32>(rowProcessing[p + 4u]);
  let minP = bitcast<f32>(rowProcessing[p + 5u]);
  let promptLength = rowProcessing[p + 6u];
  let repetition = bitcast<f32>(rowProcessing[p + 7u]);
  let temperature = bitcast<f32>(rowSampling[row * 6u + 3u]);
  let base = wid.x * params.V;
  let out = rowSampling[row * 6u + 1u] * params.outStride;

  if (presence != 0.0 || frequency != 0.0 || repetition != 1.0) {
    let seen = promptLength + step;
    for (var j = lid; j < seen; j += WG) {
      let token = sequenceToken(row, out, promptLength, j);
      var first = true;
      for (var k = 0u; k < j && first; k++) { first = sequenceToken(row, out, promptLength, k) != token; }
      if (first && token < params.V) {
        var count = 0u;
        for (var k = 0u; k < step; k++) { count += select(0u, 1u, tokens[out + k] == token); }
        var x = logits[base + token];
        if (repetition != 1.0) { x = select(x * repetition, x / repetition, x > 0.0); }
        if (count > 0u) { x -= presence + frequency * f32(count); }
        logits[base + token] = x;
      }
    }
  }
  storageBarrier();
  workgroupBarrier();
  for (var k = lid; k < biasCount; k += WG) {
    let token = rowProcessing[p + HEADER + 2u * k];
    if (token < params.V) { logits[base + token] += bitcast<f32>(rowProcessing[p + HEADER + 2u * k + 1u]); }
  }
  storageBarrier();
  workgroupBarrier();
  if (step < minTokens && lid == 0u) {
    for (var i = 0u; i < params.numEos; i++) {
      if (eosIds[i] < params.V) { logits[base + eosIds[i]] = LOWEST; }
    }
  }
  storageBarrier();
  workgroupBarrier();
  if (minP > 0.0 && temperature > 0.0) {
    var best = LOWEST;
    for (var v = lid; v < params.V; v += WG) { best = max(best, logits[base + v]); }
    let floor = workgroupMax(lid, best) + temperature * log(minP);
    for (var v = lid; v < params.V; v += WG) {
      if (logits[base + v] < floor) { logits[base + v] = LOWEST; }
    }
  }
}
