// policy-loss: the whole actor loss of verl's dp_actor for one micro-batch, fused per row of [B, T]:
//   pg (vanilla dual-clip PPO, or GSPO's sequence-level ratio) − entropyCoeff·agg(entropy) + klCoef·agg(kl(logProb, refLogProb))
// and its gradients grads[b,t] = (d loss / d logProb, d loss / d entropy). rowPartials[b] holds 8 sums:
//   [pg loss, clipped count, Σ −log-ratio, clipped-lower count, mask count, entropy agg, kl agg, total loss];
// loss-partials reduces them (counts become verl's masked means). Needs workgroup-reduce.wgsl and
// kl-estimators.wgsl prepended.
// lossMode: 0 vanilla (log-ratio clamped ±20, clip [1−low, 1+high], dual clip c for A < 0), 1 gspo.
// Gradients follow torch autograd: clamp passes on its closed interval, max/min split ties in half.
// v1: one 64-lane workgroup per row: a row pass (count, Σ log-ratio for GSPO), then the token pass.

fn maxWithGrad(a: f32, da: f32, b: f32, db: f32) -> vec2<f32> {
  if (a > b) { return vec2<f32>(a, da); }
  if (a < b) { return vec2<f32>(b, db); }
  return vec2<f32>(a, 0.5 * (da + db));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  let base = row * params.T;
  var pre = vec4<f32>(0.0);
  for (var t = lid; t < params.T; t = t + 64u) {
    let m = mask[base + t];
    pre.x = pre.x + m;
    if (m != 0.0) { pre.y = pre.y + (logProb[base + t] - oldLogProb[base + t]) * m; }
  }
  let rowTotals = workgroupSum4(lid, 64u, pre);
  let rowCount = rowTotals.x;
  let seqLogRatio = rowTotals.y / max(rowCount, 1.0);
  let low = 1.0 - params.clipRatioLow;
  let high = 1.0 + params.clipRatioHigh;

  var sumsA = vec4<f32>(0.0);
  var sumsB = vec4<f32>(0.0);
  for (var t = lid; t < params.T; t = t + 64u) {
    let i = base + t;
    let m = mask[i];
    if (m == 0.0) {
      grads[i] = vec2<f32>(0.0);
      continue;
    }
    let a = advantages[i];
    let raw = logProb[i] - oldLogProb[i];
    var loss: vec2<f32>;
    var clipped = false;
    var clippedLower = false;
    var negKl = raw;
    if (params.lossMode == 0u) {
      negKl = clamp(raw, -20.0, 20.0);
      let ratio = exp(negKl);
      let dratio = select(0.0, ratio, raw >= -20.0 && raw <= 20.0);
      let cr = clamp(ratio, low, high);
      let dcr = select(0.0, dratio, ratio >= low && ratio <= high);
      let l1 = -a * ratio;
      let l2 = -a * cr;
      clipped = l2 > l1;
      let c1 = maxWithGrad(l1, -a * dratio, l2, -a * dcr);
      let l3 = -a * params.clipRatioC;
      clippedLower = c1.x > l3 && a < 0.0;
      var c2 = c1;
      if (c1.x > l3) { c2 = vec2<f32>(l3, 0.0); } else if (c1.x == l3) { c2 = vec2<f32>(l3, 0.5 * c1.y); }
      loss = select(c1, c2, a < 0.0);
    } else {
      let logRatio = min(seqLogRatio, 10.0);
      let ratio = exp(logRatio);
      let dratio = select(0.0, ratio, seqLogRatio <= 10.0);
      let cr = clamp(ratio, low, high);
      let dcr = select(0.0, dratio, ratio >= low && ratio <= high);
      let l1 = -a * ratio;
      let l2 = -a * cr;
      clipped = l2 > l1;
      loss = maxWithGrad(l1, -a * dratio, l2, -a * dcr);
    }
    let pgWeight = aggWeight(params.pgAggMode, params.pgAggScale, m, rowCount);
    let weight = aggWeight(params.aggMode, params.aggScale, m, rowCount);
    var gradLogProb = pgWeight * loss.y;
    var gradEntropy = 0.0;
    sumsA = sumsA + vec4<f32>(pgWeight * loss.x, select(0.0, m, clipped), -negKl * m, select(0.0, m, clippedLower));
    var entropyTerm = 0.0;
    var klTerm = 0.0;
    if (params.useEntropy != 0u) {
      entropyTerm = weight * entropy[i];
      gradEntropy = -params.entropyCoeff * weight;
    }
    if (params.useKl != 0u) {
      let k = klEstimate(logProb[i], refLogProb[i], params.klCode, params.klStraightThrough);
      klTerm = weight * k.x;
      gradLogProb = gradLogProb + params.klCoef * weight * k.y;
    }
    sumsB = sumsB + vec4<f32>(m, entropyTerm, klTerm, pgWeight * loss.x - params.entropyCoeff * entropyTerm + params.klCoef * klTerm);
    grads[i] = vec2<f32>(gradLogProb, gradEntropy);
  }
  let totalA = workgroupSum4(lid, 64u, sumsA);
  let totalB = workgroupSum4(lid, 64u, sumsB);
  if (lid == 0u) {
    for (var k = 0u; k < 4u; k = k + 1u) {
      rowPartials[8u * row + k] = totalA[k];
      rowPartials[8u * row + 4u + k] = totalB[k];
    }
  }
}
