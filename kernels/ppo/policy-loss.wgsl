// policy-loss: the whole actor loss of verl's dp_actor for one micro-batch, fused per row of [B, T]:
//   pg (verl's loss_mode) − entropyCoeff·agg(entropy) + klCoef·agg(kl(logProb, refLogProb)) and its gradients
//   grads[b,t] = (d loss / d logProb, d loss / d entropy). rowPartials[b] holds 8 sums:
//   [pg loss, clipped count, Σ −log-ratio, clipped-lower count, policy-term token count, entropy agg, kl agg, total
//   loss]; loss-partials reduces them (counts become verl's masked means). Needs workgroup-reduce.wgsl,
//   kl-estimators.wgsl, vanilla-policy-term.wgsl and the LOSS_MODE_<MODE> constants of policy-loss-modes.ts
//   prepended. lossMode: 0 vanilla
//   (log-ratio r clamped ±20, clip [1−low, 1+high], dual clip c for A < 0), 1 gspo (sequence ratio), 2 gpg
//   (−A·logProb), 3 geo_mean (GMPO: −Ā·exp(mean of sgn(A)·min(sgn(A)·r, sgn(A)·clamp(r, −low, high))) per row,
//   a mean over geoRows rows), 4 cispo (−sg(clip(ratio))·A·logProb), 5 sapo (−A·sigmoid(τ(ratio−1))·4/τ,
//   τ = tauPos if A > 0 else tauNeg), 6 clip_cov (vanilla's max(l1, l2) without dual clip, 0 on selected tokens),
//   7 kl_cov (−A·ratio, + ppoKlCoef·|r| on selected tokens), 8 dppo_tv and 9 dppo_kl (DPPO-Binary: −A·sg(min(ratio,
//   c))·logProb·valid, valid = the token's probability moved less than the TV / binary-KL threshold toward A's sign,
//   clipRatioLow/High as thresholds), 10 dro (−(A·logProb − droBeta/2·r²), unclamped r). tokenFlags[B, T], a 0/1
//   pick made on the host: for 6 and 7
//   the covariance selection (covariance-selection.ts);
//   with policyMasked = 1 (vanilla and gpg: rollout correction's bypass mode) the tokens its rejection sampling
//   keeps, so the policy term, its aggregation and its metrics run over mask·tokenFlags while the entropy and
//   KL terms keep the whole mask (verl passes the rejected mask to the policy loss only). Unread otherwise.
//   isWeights(B, T), read when useIsWeights = 1: rollout correction's importance weights (verl's rollout_is_weights),
//   detached. They multiply each token's policy term and its gradient after the metrics are taken, as verl
//   multiplies pg_losses after computing its metrics; geo_mean's per-row term takes the geometric mean of its
//   tokens' weights, exp(Σ log(w + 1e-10)·mask / (Σ mask + 1e-8)). Entropy and KL terms stay unweighted. Gradients
//   follow torch autograd: clamp passes on its closed interval, max/min split ties in half. v1: one 64-lane workgroup
//   per row: a row pass (count, Σ log-ratio for GSPO, Σ GMPO log-ratio and Σ A for
//   geo_mean; Σ log-weight for weighted geo_mean), then the token pass.

// The four optional inputs are planes of one binding, `plane` elements apart, so the kernel binds 7 storage buffers
// (WebGPU's default limit is 8): refLogProb, entropy, tokenFlags, isWeights.
fn refLogProb(i: u32) -> f32 { return extras[i]; }
fn entropy(i: u32) -> f32 { return extras[params.plane + i]; }
fn tokenFlags(i: u32) -> f32 { return extras[2u * params.plane + i]; }
fn isWeights(i: u32) -> f32 { return extras[3u * params.plane + i]; }

// GMPO's token log-ratio and its derivative; z = 1 where the clamp moved r.
fn geoMeanLogRatio(raw: f32, a: f32) -> vec3<f32> {
  let sgn = sign(a);
  let c = clamp(raw, -params.clipRatioLow, params.clipRatioHigh);
  let dc = select(0.0, 1.0, raw >= -params.clipRatioLow && raw <= params.clipRatioHigh);
  let mn = minWithGrad(sgn * raw, sgn, sgn * c, sgn * dc);
  return vec3<f32>(sgn * mn.x, sgn * mn.y, select(0.0, 1.0, raw != c));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  let base = row * params.T;
  var pre = vec4<f32>(0.0);
  for (var t = lid; t < params.T; t = t + 64u) {
    let m = mask[base + t];
    pre.x = pre.x + m;
    if (m != 0.0) {
      let raw = logProb[base + t] - oldLogProb[base + t];
      pre.y = pre.y + raw * m;
      if (params.lossMode == LOSS_MODE_GEO_MEAN) {
        pre.z = pre.z + geoMeanLogRatio(raw, advantages[base + t]).x * m;
        pre.w = pre.w + advantages[base + t] * m;
      }
    }
  }
  let rowTotals = workgroupSum4(lid, 64u, pre);
  let rowCount = rowTotals.x;
  var policyRowCount = rowCount;
  if (params.policyMasked != 0u) {
    var kept = 0.0;
    for (var t = lid; t < params.T; t = t + 64u) { kept = kept + mask[base + t] * tokenFlags(base + t); }
    policyRowCount = workgroupSum4(lid, 64u, vec4<f32>(kept, 0.0, 0.0, 0.0)).x;
  }
  var geoIsWeight = 1.0;
  if (params.lossMode == LOSS_MODE_GEO_MEAN && params.useIsWeights != 0u) {
    var logWeight = 0.0;
    for (var t = lid; t < params.T; t = t + 64u) {
      let m = mask[base + t];
      if (m != 0.0) { logWeight = logWeight + log(isWeights(base + t) + 1e-10) * m; }
    }
    geoIsWeight = exp(workgroupSum4(lid, 64u, vec4<f32>(logWeight, 0.0, 0.0, 0.0)).x / (rowCount + 1e-8));
  }
  let seqLogRatio = rowTotals.y / max(rowCount, 1.0);
  let geoRowLoss = -rowTotals.w / (rowCount + 1e-8) * exp(rowTotals.z / (rowCount + 1e-8));
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
    let lp = logProb[i];
    // The ±20-clamped ratio of vanilla, cispo and sapo.
    let nkl = clamp(raw, -20.0, 20.0);
    let ratio20 = exp(nkl);
    let dratio20 = select(0.0, ratio20, raw >= -20.0 && raw <= 20.0);
    let pm = select(m, m * tokenFlags(i), params.policyMasked != 0u);
    var pgWeight = aggWeight(params.pgAggMode, params.pgAggScale, pm, policyRowCount);
    var isWeight = select(1.0, isWeights(i), params.useIsWeights != 0u);
    switch params.lossMode {
      case LOSS_MODE_VANILLA: {
        negKl = nkl;
        let v = vanillaPolicyTerm(a, ratio20, dratio20, low, high, params.clipRatioC);
        loss = v.loss;
        clipped = v.clipped;
        clippedLower = v.clippedLower;
      }
      case LOSS_MODE_GSPO: {
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
      case LOSS_MODE_GPG: {
        loss = vec2<f32>(-lp * a, -a);
      }
      case LOSS_MODE_GEO_MEAN: {
        let g = geoMeanLogRatio(raw, a);
        loss = vec2<f32>(geoRowLoss, geoRowLoss * g.y);
        clipped = g.z != 0.0 && a > 0.0;
        clippedLower = g.z != 0.0 && a < 0.0;
        pgWeight = m / ((rowCount + 1e-8) * params.geoRows);
        isWeight = geoIsWeight;
      }
      case LOSS_MODE_CISPO: {
        negKl = nkl;
        let cr = clamp(ratio20, low, high);
        loss = vec2<f32>(-cr * a * lp, -cr * a);
        clipped = cr != ratio20;
      }
      case LOSS_MODE_SAPO: {
        negKl = nkl;
        let tau = select(params.tauNeg, params.tauPos, a > 0.0);
        let s = 1.0 / (1.0 + exp(-tau * (ratio20 - 1.0)));
        loss = vec2<f32>(-s * (4.0 / tau) * a, -a * 4.0 * s * (1.0 - s) * dratio20);
      }
      case LOSS_MODE_CLIP_COV: {
        let ratio = exp(raw);
        let cr = clamp(ratio, low, high);
        let dcr = select(0.0, ratio, ratio >= low && ratio <= high);
        let keep = 1.0 - tokenFlags(i);
        loss = maxWithGrad(-a * ratio, -a * ratio, -a * cr, -a * dcr) * keep;
        clipped = keep == 0.0;
      }
      case LOSS_MODE_DPPO_TV, LOSS_MODE_DPPO_KL: {
        negKl = nkl;
        let p = exp(lp);
        let pOld = exp(oldLogProb[i]);
        var valid: bool;
        if (params.lossMode == LOSS_MODE_DPPO_TV) {
          valid = select(p - pOld >= -params.clipRatioLow, p - pOld <= params.clipRatioHigh, a > 0.0);
        } else {
          let binaryKl = pOld * (oldLogProb[i] - lp) + (1.0 - pOld) * log((1.0 - pOld + 1e-8) / (1.0 - p + 1e-8));
          valid = select(binaryKl <= params.clipRatioLow || p >= pOld, binaryKl <= params.clipRatioHigh || p <= pOld,
              a > 0.0);
        }
        let coefficient = -a * min(ratio20, params.clipRatioC) * select(0.0, 1.0, valid);
        loss = vec2<f32>(coefficient * lp, coefficient);
        clipped = !valid;
        clippedLower = valid && ratio20 > params.clipRatioC;
      }
      case LOSS_MODE_DRO: {
        loss = vec2<f32>(-(lp * a - 0.5 * params.droBeta * raw * raw), -a + params.droBeta * raw);
      }
      case LOSS_MODE_KL_COV, default: {
        let ratio = exp(raw);
        let penalty = tokenFlags(i) * params.ppoKlCoef;
        loss = vec2<f32>(-a * ratio + penalty * abs(raw), -a * ratio + penalty * sign(raw));
        // kl_cov reports mean |log-ratio| as actor/ppo_kl.
        negKl = -abs(raw);
      }
    }
    loss = loss * isWeight;
    let weight = aggWeight(params.aggMode, params.aggScale, m, rowCount);
    var gradLogProb = pgWeight * loss.y;
    var gradEntropy = 0.0;
    sumsA = sumsA + vec4<f32>(pgWeight * loss.x, select(0.0, pm, clipped), -negKl * pm, select(0.0, pm, clippedLower));
    var entropyTerm = 0.0;
    var klTerm = 0.0;
    if (params.useEntropy != 0u) {
      entropyTerm = weight * entropy(i);
      gradEntropy = -params.entropyCoeff * weight;
    }
    if (params.useKl != 0u) {
      let k = klEstimate(logProb[i], refLogProb(i), params.klCode, params.klStraightThrough);
      klTerm = weight * k.x;
      gradLogProb = gradLogProb + params.klCoef * weight * k.y;
    }
    sumsB = sumsB + vec4<f32>(pm, entropyTerm, klTerm,
        pgWeight * loss.x - params.entropyCoeff * entropyTerm + params.klCoef * klTerm);
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
