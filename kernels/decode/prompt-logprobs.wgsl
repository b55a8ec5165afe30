// prompt-logprobs: for each position of a prompt, the log-prob and rank of the prompt token that follows it and the
// K most likely tokens there with their log-probs, for a server's prompt log-probs (vLLM's prompt_logprobs and echo,
// SGLang's logprob_start_len), and the log-probs of M given tokens at each position (SGLang's token_ids_logprob; every
// token of the vocabulary for vLLM's prompt_logprobs above 20 or -1). Log-probs are log_softmax(logits ·
// invTemperature): 1 for prompt log-probs (vLLM's are raw: no temperature or penalties), 1 / temperature where a
// sampled response is scored as the sampler saw it.
//   logits (rows, V): the positions rowOffset … rowOffset + rows − 1 of the prompt (a chunk of it)
//   targets (N): the prompt token that follows each position
//   tokenLogprobs (N) f32, ranks (N) u32 ← at rowOffset + row: the target's log-prob and its rank (1 + the tokens
//     with a larger logit, vLLM's rank)
//   topIds, topLogprobs (N, K) ← at rowOffset + row (nothing when K = 0)
//   gatherIds (M), gathered (rows, M) ← at row, chunk-local: the log-prob of each given token (nothing when M = 0)
// v1: one workgroup of WG lanes per position; rowTopK's passes (row-top-k.wgsl), then one counting pass and one
//     gathering pass.

override WG: u32 = 256u;

// reduceValue, reduceIndex, treeStart, workgroupSum: row-reduce.wgsl; rowTopK: row-top-k.wgsl (both prepended).

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  if (lid == 0u) { treeStart = WG / 2u; }
  let at = params.rowOffset + row;
  let base = row * params.V;
  let scale = params.invTemperature;
  let normalizer = rowTopK(lid, base, at * params.K, params.K, scale);
  let next = targets[at];
  let x = logits[base + next];
  var above = 0.0;
  for (var v = lid; v < params.V; v += WG) { above += select(0.0, 1.0, logits[base + v] > x); }
  // Counts stay exact in f32 up to 2^24, far above any vocabulary.
  let rank = workgroupSum(lid, above);
  if (lid == 0u) {
    tokenLogprobs[at] = (x - normalizer.x) * scale - normalizer.y;
    ranks[at] = u32(rank) + 1u;
  }
  for (var j = lid; j < params.M; j += WG) {
    gathered[row * params.M + j] = (logits[base + gatherIds[j]] - normalizer.x) * scale - normalizer.y;
  }
}
