// pairwise-loss: the reward model's Bradley–Terry loss and its gradient, fused with the gather of each row's score.
// values [2P, T]: the per-token scores of P chosen rows (0..P-1) then their P rejected rows (P..2P-1); last [2P]:
// each row's last non-pad position, where HF's *ForSequenceClassification reads its score; margin [P].
// With d = r_chosen − r_rejected − margin: loss = mean_p −log σ(d) = mean_p softplus(−d), and
// dValues [2P, T] = d loss / d values: −σ(−d)/P at a chosen row's last token, +σ(−d)/P at its rejected row's, zero
// elsewhere (the whole buffer is written, so no clear is needed). stats [3] = (loss, accuracy = mean[r_c > r_r],
// mean r_c − r_r), as TRL's RewardTrainer reports them; workgroup 0 computes them. dValues is multiplied by gradScale
// (1 / micro-batches of a gradient-accumulation step), so accumulating micro-batches needs no extra pass.
// Needs workgroup-reduce.wgsl prepended.
// v1: a lane per score element (any device: the element pass is a copy), the stats by one 64-lane workgroup in
// fixed order (P is a batch of pairs, tens to hundreds).

fn softplus(x: f32) -> f32 { return max(x, 0.0) + log(1.0 + exp(-abs(x))); }

// σ(−d) without overflow for large |d|.
fn sigmoidOfNegative(d: f32) -> f32 {
  if (d >= 0.0) {
    let e = exp(-d);
    return e / (1.0 + e);
  }
  return 1.0 / (1.0 + exp(d));
}

fn pairDifference(p: u32) -> f32 {
  let chosen = values[p * params.T + last[p]];
  let rejected = values[(p + params.P) * params.T + last[p + params.P]];
  return chosen - rejected;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * groups.x + wid.x) * 64u + lid;
  if (i < 2u * params.P * params.T) {
    let row = i / params.T;
    var grad = 0.0;
    if (i % params.T == last[row]) {
      let p = row % params.P;
      let scale = params.gradScale * sigmoidOfNegative(pairDifference(p) - margin[p]) / f32(params.P);
      grad = select(scale, -scale, row < params.P);
    }
    dValues[i] = grad;
  }
  if (wid.x == 0u && wid.y == 0u) {
    var sums = vec4<f32>(0.0);
    for (var p = lid; p < params.P; p = p + 64u) {
      let difference = pairDifference(p);
      sums = sums + vec4<f32>(softplus(-(difference - margin[p])), select(0.0, 1.0, difference > 0.0), difference, 0.0);
    }
    let total = workgroupSum4(lid, 64u, sums) / f32(params.P);
    if (lid == 0u) {
      stats[0] = total.x;
      stats[1] = total.y;
      stats[2] = total.z;
    }
  }
}
