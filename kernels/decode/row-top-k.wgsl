// decode row top-K: the K most likely tokens of one row and their log-probs, for the kernels that report
// alternatives (top-logprobs for generated tokens, prompt-logprobs for prompt tokens), prepended by their launchers
// after row-reduce.wgsl. The including kernel binds `logits` (rows, V) and `topIds`, `topLogprobs` (…, K), and its
// uniforms have V. Ties rank the lower index first (torch.topk's order on a sorted tie).
// v1: K argmax passes over V, each taking the largest (value, -index) below the previous pass's, so no sort and no
//     scratch beyond the reduction tree.

const LOWEST: f32 = -3.4028234e38;
const NONE: u32 = 0xFFFFFFFFu;

// (value, index) ranks before (otherValue, otherIndex): larger value, or equal value and lower index.
fn before(value: f32, index: u32, otherValue: f32, otherIndex: u32) -> bool {
  return value > otherValue || (value == otherValue && index < otherIndex);
}

// The first of the lanes' candidates in rank order; NONE when no lane has one.
fn workgroupFirst(lid: u32, value: f32, index: u32) -> u32 {
  reduceValue[lid] = value;
  reduceIndex[lid] = index;
  for (var stride = workgroupUniformLoad(&treeStart); stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      let otherIndex = reduceIndex[lid + stride];
      let otherFirst = before(reduceValue[lid + stride], otherIndex, reduceValue[lid], reduceIndex[lid]);
      if (otherIndex != NONE && (reduceIndex[lid] == NONE || otherFirst)) {
        reduceValue[lid] = reduceValue[lid + stride];
        reduceIndex[lid] = otherIndex;
      }
    }
    workgroupBarrier();
  }
  let first = workgroupUniformLoad(&reduceIndex[0]);
  workgroupBarrier();
  return first;
}

// The row at logits[base..base + V): writes its K most likely tokens and log_softmax(logits · invTemperature) of
// each at topIds/topLogprobs[out + k], and returns (max logit, log Σ exp((x − max) · invTemperature)), with which
// any token's log-prob is (x − max) · invTemperature − the second.
fn rowTopK(lid: u32, base: u32, out: u32, K: u32, invTemperature: f32) -> vec2<f32> {
  var best = LOWEST;
  for (var v = lid; v < params.V; v += WG) { best = max(best, logits[base + v]); }
  let maxLogit = workgroupMax(lid, best);
  var partial = 0.0;
  for (var v = lid; v < params.V; v += WG) { partial += exp((logits[base + v] - maxLogit) * invTemperature); }
  let logNormalizer = log(workgroupSum(lid, partial));
  var prevValue = 0.0;
  var prevIndex = NONE;
  for (var k = 0u; k < K; k++) {
    var bestValue = LOWEST;
    var bestIndex = NONE;
    for (var v = lid; v < params.V; v += WG) {
      let x = logits[base + v];
      let below = prevIndex == NONE || before(prevValue, prevIndex, x, v);
      if (below && (bestIndex == NONE || before(x, v, bestValue, bestIndex))) {
        bestValue = x;
        bestIndex = v;
      }
    }
    let chosen = workgroupFirst(lid, bestValue, bestIndex);
    let x = logits[base + chosen];
    if (lid == 0u) {
      topIds[out + k] = chosen;
      topLogprobs[out + k] = (x - maxLogit) * invTemperature - logNormalizer;
    }
    prevValue = x;
    prevIndex = chosen;
  }
  return vec2<f32>(maxLogit, logNormalizer);
}
