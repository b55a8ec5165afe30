// sample: draws one next token per row from its logits, entirely on the GPU, and advances the decode state.
//   logits (rows·rowStride, V): row r reads logits row r·rowStride + rowOffset (1, 0 for a decode step's (B, V)); a
//     window of the rows [firstRow, firstRow + rows) when all of them are above one binding: the per-row tensors
//     below are bound whole and indexed from firstRow
//   samplingTable u32: the numEos ids that finish a row from word 0, then from word rowStart (B, 6) per row (one
//     binding, so the kernel binds 8 storage buffers, WebGPU's default limit):
//     [stream, outRow, seed, bits of temperature, topK, bits of topP]: the sample
//     each row holds draws from the random stream (seed, stream) and writes output row outRow, with its own
//     temperature, top-k and top-p, so all survive batch compaction (finished rows dropped, the rest renumbered)
//     and rows of different requests (a server's) decode together
//   steps (B) each row's own step (the column it writes; the random stream's step), += 1 with positions: rows
//     decode at different steps when a finished row's slot has taken the next waiting sample
//   ids (B) ← sampled token (padId once finished); positions (B) += 1; finished (B) ← sampled is an eos id
//   tokens, logprobs (outRows, outStride) ← token and log_softmax(logits / temperature)[token] at
//     (outRow[b], steps[b]); a row whose step reached outStride has spent its budget and writes nothing
// temperature 0 is greedy (argmax, lowest index on ties; log-prob at temperature 1). Otherwise the kept set is
// the HF warper chain: top-k (topK = 0 off) keeps logits ≥ the k-th largest, ties included; top-p (topP = 1 off)
// then keeps the largest logits whose mass, renormalised over the top-k set, first reaches topP. Both are value
// thresholds, found by building the threshold's order-preserving u32 key bit by bit (32 counting passes each),
// which needs no sort and no float atomics. The token is the Gumbel-max argmax of (logit − max) / temperature + g,
// g = −log(−log(u)), u from a pcg4d hash of (vocab index, stream, step, seed), so a sample's tokens depend
// on (seed, stream, step) only, never on the row or batch it decodes in: an exact draw from the
// renormalised kept distribution, in one pass, reproducible for a given seed. The log-prob is over the full
// temperature-scaled distribution, the one PPO's teacher-forced old_log_prob recomputes.
// v1: one workgroup of WG lanes per row (wg8 on software rasterisers, wg256 elsewhere), strided scalar loops over V,
//     tree reductions; finished rows return at once.

override WG: u32 = 256u;

// reduceValue, reduceIndex, treeStart and workgroupSum: row-reduce.wgsl, prepended by the launcher.
var<workgroup> rowFinished: u32;

// The lowest finite f32: WGSL has no infinity literal (and fast-math may assume none).
const LOWEST: f32 = -3.4028234e38;

// Monotone map of f32 onto u32 (a < b ⇔ key(a) < key(b)), so a value threshold can be searched bit by bit.
fn orderedKey(x: f32) -> u32 {
  let bits = bitcast<u32>(x);
  return select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
}

// Jarzynski & Olano, "Hash Functions for GPU Rendering" (JCGT 2020): a counter-based generator, so any
// (token, row, step) draws its number independently of every other.
fn pcg4d(input: vec4<u32>) -> vec4<u32> {
  var v = input * 1664525u + vec4<u32>(1013904223u);
  v.x += v.y * v.w; v.y += v.z * v.x; v.z += v.x * v.y; v.w += v.y * v.z;
  v ^= v >> vec4<u32>(16u);
  v.x += v.y * v.w; v.y += v.z * v.x; v.z += v.x * v.y; v.w += v.y * v.z;
  return v;
}

fn gumbel(token: u32, stream: u32, step: u32, seed: u32) -> f32 {
  let bits = pcg4d(vec4<u32>(token, stream, step, seed)).x;
  // 24 bits centred in their interval: u ∈ (0, 1) strictly, so both logs stay finite.
  let u = (f32(bits >> 8u) + 0.5) * (1.0 / 16777216.0);
  return -log(-log(u));
}

// The reductions return a workgroup-uniform value (loop bounds and branches downstream depend on it).
fn workgroupCount(lid: u32, value: u32) -> u32 {
  reduceIndex[lid] = value;
  // The uniform load is also the barrier that publishes the stores above.
  for (var stride = workgroupUniformLoad(&treeStart); stride > 0u; stride >>= 1u) {
    if (lid < stride) { reduceIndex[lid] += reduceIndex[lid + stride]; }
    workgroupBarrier();
  }
  let total = workgroupUniformLoad(&reduceIndex[0]);
  workgroupBarrier();
  return total;
}

// Index of the largest value, the lowest index among equals (torch.argmax's choice).
fn workgroupArgmax(lid: u32, value: f32, index: u32) -> u32 {
  reduceValue[lid] = value;
  reduceIndex[lid] = index;
  // The uniform load is also the barrier that publishes the stores above.
  for (var stride = workgroupUniformLoad(&treeStart); stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      let other = reduceValue[lid + stride];
      let otherIndex = reduceIndex[lid + stride];
      if (other > reduceValue[lid] || (other == reduceValue[lid] && otherIndex < reduceIndex[lid])) {
        reduceValue[lid] = other;
        reduceIndex[lid] = otherIndex;
      }
    }
    workgroupBarrier();
  }
  let best = workgroupUniformLoad(&reduceIndex[0]);
  workgroupBarrier();
  return best;
}

// Unnormalised probability mass exp((logit − maxLogit) / T) of the logits whose key is ≥ floorKey.
fn massAtOrAbove(lid: u32, base: u32, maxLogit: f32, invTemperature: f32, floorKey: u32) -> f32 {
  var partial = 0.0;
  for (var v = lid; v < params.V; v += WG) {
    let x = logits[base + v];
    if (orderedKey(x) >= floorKey) { partial += exp((x - maxLogit) * invTemperature); }
  }
  return workgroupSum(lid, partial);
}

// Key of the k-th largest logit: the largest key t with #{key ≥ t} ≥ k.
fn topKKey(lid: u32, base: u32, topK: u32) -> u32 {
  var answer = 0u;
  for (var bit = 32u; bit > 0u; bit--) {
    let candidate = answer | (1u << (bit - 1u));
    var count = 0u;
    for (var v = lid; v < params.V; v += WG) {
      count += select(0u, 1u, orderedKey(logits[base + v]) >= candidate);
    }
    if (workgroupCount(lid, count) >= topK) { answer = candidate; }
  }
  return answer;
}

// Largest key t ≥ floorKey whose mass at or above it still reaches topP of the mass at or above floorKey.
// mass(t ≤ floorKey) is the same sum in the same order as the target's, so the search starts from a true
// predicate and always keeps the largest logit.
fn topPKey(lid: u32, base: u32, maxLogit: f32, invTemperature: f32, floorKey: u32, topP: f32) -> u32 {
  let wanted = topP * massAtOrAbove(lid, base, maxLogit, invTemperature, floorKey);
  var answer = 0u;
  for (var bit = 32u; bit > 0u; bit--) {
    let candidate = answer | (1u << (bit - 1u));
    if (massAtOrAbove(lid, base, maxLogit, invTemperature, max(candidate, floorKey)) >= wanted) { answer = candidate; }
  }
  return max(answer, floorKey);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = params.firstRow + wid.x;
  let rowSampling = params.rowStart + row * 6u;
  let stream = samplingTable[rowSampling];
  let seed = samplingTable[rowSampling + 2u];
  let temperature = bitcast<f32>(samplingTable[rowSampling + 3u]);
  let topK = samplingTable[rowSampling + 4u];
  let topP = bitcast<f32>(samplingTable[rowSampling + 5u]);
  let step = steps[row];
  let out = samplingTable[rowSampling + 1u] * params.outStride + step;
  if (lid == 0u) {
    rowFinished = select(finished[row], 1u, step >= params.outStride);
    treeStart = WG / 2u;
  }
  if (workgroupUniformLoad(&rowFinished) != 0u) {
    if (lid == 0u) {
      ids[row] = params.padId;
      if (step < params.outStride) {
        tokens[out] = params.padId;
        logprobs[out] = 0.0;
      }
    }
    return;
  }
  let base = (wid.x * params.rowStride + params.rowOffset) * params.V;

  var best = LOWEST;
  var bestIndex = 0u;
  for (var v = lid; v < params.V; v += WG) {
    let x = logits[base + v];
    if (x > best) { best = x; bestIndex = v; }
  }
  let argmax = workgroupArgmax(lid, best, bestIndex);
  let maxLogit = logits[base + argmax];

  let greedy = temperature <= 0.0;
  let invTemperature = select(1.0 / temperature, 1.0, greedy);
  let logNormalizer = log(massAtOrAbove(lid, base, maxLogit, invTemperature, 0u));

  var chosen = argmax;
  if (!greedy) {
    var floorKey = 0u;
    if (topK > 0u && topK < params.V) { floorKey = topKKey(lid, base, topK); }
    if (topP < 1.0) { floorKey = topPKey(lid, base, maxLogit, invTemperature, floorKey, topP); }
    var bestScore = LOWEST;
    var bestToken = 0u;
    for (var v = lid; v < params.V; v += WG) {
      let x = logits[base + v];
      if (orderedKey(x) >= floorKey) {
        let score = (x - maxLogit) * invTemperature + gumbel(v, stream, step, seed);
        if (score > bestScore) { bestScore = score; bestToken = v; }
      }
    }
    chosen = workgroupArgmax(lid, bestScore, bestToken);
  }

  if (lid == 0u) {
    var isEos = false;
    for (var i = 0u; i < params.numEos; i++) {
      if (samplingTable[i] == chosen) { isEos = true; }
    }
    ids[row] = chosen;
    tokens[out] = chosen;
    logprobs[out] = (logits[base + chosen] - maxLogit) * invTemperature - logNormalizer;
    finished[row] = select(0u, 1u, isEos);
    positions[row] += 1;
    steps[row] = step + 1u;
  }
}
