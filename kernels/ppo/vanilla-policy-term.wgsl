// Shared snippet (no bindings): verl's vanilla clipped policy term of one token (compute_policy_loss_vanilla), with
// d / d logProb, for the actor loss and the distillation loss's policy-gradient path. `ratio` is exp of the log-ratio
// clamped to ±20 and `dratio` its derivative (0 outside the clamp); low = 1 − clip_ratio_low, high = 1 +
// clip_ratio_high, clipC the dual clip for A < 0. Gradients follow torch autograd: max/min split ties in half.

fn maxWithGrad(a: f32, da: f32, b: f32, db: f32) -> vec2<f32> {
  if (a > b) { return vec2<f32>(a, da); }
  if (a < b) { return vec2<f32>(b, db); }
  return vec2<f32>(a, 0.5 * (da + db));
}

fn minWithGrad(a: f32, da: f32, b: f32, db: f32) -> vec2<f32> {
  if (a < b) { return vec2<f32>(a, da); }
  if (a > b) { return vec2<f32>(b, db); }
  return vec2<f32>(a, 0.5 * (da + db));
}

struct VanillaTerm {
  loss: vec2<f32>,
  clipped: bool,
  clippedLower: bool,
}

fn vanillaPolicyTerm(a: f32, ratio: f32, dratio: f32, low: f32, high: f32, clipC: f32) -> VanillaTerm {
  let cr = clamp(ratio, low, high);
  let dcr = select(0.0, dratio, ratio >= low && ratio <= high);
  let l1 = -a * ratio;
  let l2 = -a * cr;
  let c1 = maxWithGrad(l1, -a * dratio, l2, -a * dcr);
  let l3 = -a * clipC;
  var c2 = c1;
  if (c1.x > l3) { c2 = vec2<f32>(l3, 0.0); } else if (c1.x == l3) { c2 = vec2<f32>(l3, 0.5 * c1.y); }
  return VanillaTerm(select(c1, c2, a < 0.0), l2 > l1, c1.x > l3 && a < 0.0);
}
