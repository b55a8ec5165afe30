// top-logprobs: the K most likely next tokens of each row and their log-probs, for a server's top-N log-probs
// (OpenAI's logprobs: N / top_logprobs, SGLang's top_logprobs_num). Dispatched before `sample` on the same logits,
// so it writes the column the sampler is about to fill.
//   logits (rows, V); rowSampling (B, 6) u32 as sample.wgsl reads it: outRow (word 1) and temperature (word 3)
//   steps, finished (B): the column of this step; a finished row, or one whose step reached outStride, writes nothing
//   topIds, topLogprobs (outRows, outStride, K) ← at (outRow, step): the K tokens of the largest logits (ties: the
//     lowest index first, torch.topk's order on a sorted tie) and log_softmax(logits / temperature) of each
//     (temperature 1 when greedy), the distribution whose log-prob the sampler writes for the token it draws
// v1: one workgroup of WG lanes per row; K argmax passes over V, each taking the largest (value, -index) below the
//     previous pass's, so no sort and no scratch beyond the reduction tree.

override WG: u32 = 256u;

// reduceValue, reduceIndex, treeStart and workgroupSum: row-reduce.wgsl, prepended by the launcher.
var<workgroup> rowSkipped: u32;

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

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  let step = steps[row];
  if (lid == 0u) {
    rowSkipped = select(finished[row], 1u, step >= params.outStride);
    treeStart = WG / 2u;
  }
  if (workgroupUniformLoad(&rowSkipped) != 0u) { return; }
  let temperature = bitcast<f32>(rowSampling[row * 6u + 3u]);
  let invTemperature = select(1.0 / temperature, 1.0, temperature <= 0.0);
  let base = row * params.V;
  let out = (rowSampling[row * 6u + 1u] * params.outStride + step) * params.K;

  var prevValue = 0.0;
  var prevIndex = NONE;
  var maxLogit = 0.0;
  var logNormalizer = 0.0;
  for (var k = 0u; k < params.K; k++) {
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
    if (k == 0u) {
      maxLogit = x;
      var partial = 0.0;
      for (var v = lid; v < params.V; v += WG) { partial += exp((logits[base + v] - maxLogit) * invTemperature); }
      logNormalizer = log(workgroupSum(lid, partial));
    }
    if (lid == 0u) {
      topIds[out + k] = chosen;
      topLogprobs[out + k] = (x - maxLogit) * invTemperature - logNormalizer;
    }
    prevValue = x;
    prevIndex = chosen;
  }
}
