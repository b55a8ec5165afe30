// distillation-loss: on-policy distillation's loss for one micro-batch (verl 1dda039b's distillation_loss with
//   compute_distillation_loss_reverse_kl_estimator, or a per-token loss made elsewhere), fused per row of [B, T].
//   Per token: l = kl_penalty(logProb, teacher, klCode), or with precomputed = 1 teacher[i] itself (forward_kl_topk's
//   KL, whose gradient goes through the logits), clamped to ±maxClamp. usePolicyGradient = 0: loss = agg(l);
//   1: vanilla PPO with advantage −sg(l) against oldLogProb (clip [1−low, 1+high], dual clip clipC, isWeights times
//   the term when useIsWeights = 1). coef × d loss / d logProb goes to grads[b,t].x: added to what the actor loss
//   wrote there (accumulate = 1), or written with grads.y = 0. lossGrad[b,t]: the back-propagated path's gradient
//   (0 on the policy-gradient path); precomputed, coef × d loss / d l, and grads.x gets none of it (the loss's
//   gradient leaves through the logits).
//   rowPartials[b] holds 8 values: [loss (aggregated, before coef), Σ |l| before the clamp, token count, clipped
//   count, Σ −log-ratio, clipped-lower count, min l, max l (before the clamp; ±3.4e38 for a row without tokens)].
//   Needs workgroup-reduce.wgsl, kl-estimators.wgsl and vanilla-policy-term.wgsl prepended. v1: one 64-lane
//   workgroup per row: a count pass (the row's tokens for seq-mean-token-mean), then the token pass.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  let base = row * params.T;
  var count = 0.0;
  for (var t = lid; t < params.T; t = t + 64u) { count = count + mask[base + t]; }
  let rowCount = workgroupSum4(lid, 64u, vec4<f32>(count, 0.0, 0.0, 0.0)).x;
  var sumsA = vec4<f32>(0.0);
  var sumsB = vec4<f32>(0.0);
  var lowest = 3.4e38;
  var highest = -3.4e38;
  for (var t = lid; t < params.T; t = t + 64u) {
    let i = base + t;
    let m = mask[i];
    if (m == 0.0) {
      if (params.accumulate == 0u) { grads[i] = vec2<f32>(0.0); }
      lossGrad[i] = 0.0;
      continue;
    }
    let lp = logProb[i];
    var k = vec2<f32>(teacher[i], 1.0);
    if (params.precomputed == 0u) { k = klEstimate(lp, teacher[i], params.klCode, params.klStraightThrough); }
    lowest = min(lowest, k.x);
    highest = max(highest, k.x);
    var term = vec2<f32>(clamp(k.x, -params.maxClamp, params.maxClamp), select(0.0, k.y, abs(k.x) <= params.maxClamp));
    var clipped = false;
    var clippedLower = false;
    var negKl = 0.0;
    if (params.usePolicyGradient != 0u) {
      let raw = lp - oldLogProb[i];
      negKl = clamp(raw, -20.0, 20.0);
      let ratio = exp(negKl);
      let dratio = select(0.0, ratio, raw >= -20.0 && raw <= 20.0);
      let v = vanillaPolicyTerm(-term.x, ratio, dratio, 1.0 - params.clipRatioLow, 1.0 + params.clipRatioHigh,
          params.clipRatioC);
      term = v.loss * select(1.0, isWeights[i], params.useIsWeights != 0u);
      clipped = v.clipped;
      clippedLower = v.clippedLower;
    }
    let weight = aggWeight(params.aggMode, params.aggScale, m, rowCount);
    var g = params.coef * weight * term.y;
    lossGrad[i] = select(g, 0.0, params.usePolicyGradient != 0u);
    if (params.precomputed != 0u && params.usePolicyGradient == 0u) { g = 0.0; }
    if (params.accumulate != 0u) {
      grads[i] = vec2<f32>(grads[i].x + g, grads[i].y);
    } else {
      grads[i] = vec2<f32>(g, 0.0);
    }
    sumsA = sumsA + vec4<f32>(weight * term.x, abs(k.x) * m, m, select(0.0, m, clipped));
    sumsB = sumsB + vec4<f32>(-negKl * m, select(0.0, m, clippedLower), 0.0, 0.0);
  }
  let totalA = workgroupSum4(lid, 64u, sumsA);
  let totalB = workgroupSum4(lid, 64u, sumsB);
  let rowLowest = -workgroupMax(lid, 64u, -lowest);
  let rowHighest = workgroupMax(lid, 64u, highest);
  if (lid == 0u) {
    for (var k = 0u; k < 4u; k = k + 1u) { rowPartials[8u * row + k] = totalA[k]; }
    rowPartials[8u * row + 4u] = totalB.x;
    rowPartials[8u * row + 5u] = totalB.y;
    rowPartials[8u * row + 6u] = rowLowest;
    rowPartials[8u * row + 7u] = rowHighest;
  }
}
