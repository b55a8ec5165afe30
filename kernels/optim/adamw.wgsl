// adamw: one fused PyTorch AdamW step over an arena segment, with clip_grad_norm_ scaling read from the GPU.
// param, grad, expAvg (m), expAvgSq (v): (n) as vec4; normSquared: (1) = Σ g² over all segments, unscaled grads.
// g ← grad·gradScale·clip, clip = min(1, maxNorm / (|gradScale|·√normSquared + 1e-6)) when maxNorm > 0;
// p ← p·decayBefore; m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
// p ← (p − stepSize·m / (√v / √(1−β2^t) + eps))·decayAfter, one decay 1 − lr·wd and the other 1 (torch decays before
// the step, bitsandbytes after).
// A non-finite normSquared (a NaN or Inf gradient anywhere) skips the update: params, m and v keep their values,
// so the weights stay those of the last good step while the host reads the norm and stops the run.
// v1: one vec4 per lane, 256 lanes, workgroups folded into y past 65535.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= params.n4) { return; }
  // By its bits: WGSL lets a compiler assume floats are finite, so isNan-style comparisons may fold away.
  if ((bitcast<u32>(normSquared[0]) & 0x7f800000u) == 0x7f800000u) { return; }
  var clip = 1.0;
  if (params.maxNorm > 0.0) {
    let norm = abs(params.gradScale) * sqrt(normSquared[0]);
    clip = min(1.0, params.maxNorm / (norm + 1e-6));
  }
  let g = grad[i] * (params.gradScale * clip);
  let m = params.beta1 * expAvg[i] + (1.0 - params.beta1) * g;
  let v = params.beta2 * expAvgSq[i] + (1.0 - params.beta2) * g * g;
  expAvg[i] = m;
  expAvgSq[i] = v;
  let denom = sqrt(v) / params.biasCorrection2Sqrt + params.eps;
  param[i] = (param[i] * params.decayBefore - params.stepSize * (m / denom)) * params.decayAfter;
}
