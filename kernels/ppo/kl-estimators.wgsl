// Shared snippet (no bindings): verl's kl_penalty estimators and d kl / d logprob.
// code: 0 = k1 ("kl"), 1 = abs, 2 = k2 ("mse"), 3 = k3 ("low_var_kl": log-ratio clamped to ±20, result to
// [-10, 10]); straightThrough = verl's "+" suffix (forward value of the estimator, gradient of k2).

fn klEstimate(logprob: f32, refLogprob: f32, code: u32, straightThrough: u32) -> vec2<f32> {
  let diff = logprob - refLogprob;
  var value = diff;
  var grad = 1.0;
  if (code == 1u) {
    value = abs(diff);
    grad = sign(diff);
  } else if (code == 2u) {
    value = 0.5 * diff * diff;
    grad = diff;
  } else if (code == 3u) {
    let raw = refLogprob - logprob;
    let kl = clamp(raw, -20.0, 20.0);
    let ratio = exp(kl);
    // exp(kl) − kl − 1 cancels catastrophically in f32 for small kl; the series keeps full relative precision.
    var kld = ratio - kl - 1.0;
    if (abs(kl) < 0.01) { kld = kl * kl * (0.5 + kl * (1.0 / 6.0 + kl / 24.0)); }
    value = clamp(kld, -10.0, 10.0);
    let passes = raw >= -20.0 && raw <= 20.0 && kld >= -10.0 && kld <= 10.0;
    grad = select(0.0, 1.0 - ratio, passes);
  }
  if (straightThrough != 0u) { grad = diff; }
  return vec2<f32>(value, grad);
}
