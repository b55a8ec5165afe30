// forward-kl-topk: on-policy distillation's forward KL over the teacher's top-k (verl 1dda039b's
//   compute_forward_kl_topk), for the response tokens of m sequences of S positions (R response columns, the last R
//   of each window; response token t of row b is predicted at position b·S + S − R − 1 + t).
//   logits: per response token, z_k = hidden · weight[id_k] (hidden (m·S, C)) for the ids in one binding window of
//     the weight (rows [v0, v0 + width) of (V, C)) and the tokens whose position lies in one binding window of the
//     hidden states (rows [h0, h0 + hiddenRows)), written into coefs (m, R, K); one dispatch per pair of windows, so a
//     head above one binding (Qwen3's 151,936 × 1,024 f32: 622 MB) or split across buffers is read in place, and so
//     are a micro-batch's hidden states above one binding (a thread outside the window returns at once).
//     v1: one thread per token, each of its K dot products over C in turn. The weight is float32 or bf16/f16
//     (mixed precision's compute copy): the launcher appends weightAt, which unpacks a half element to float32.
//   kl: per response token, from those z_k and the forward's lse (m·S) of logits / T:
//     s_k = z_k / T − lse, the student's log-prob of the teacher's k-th id; with t_k the
//     teacher's, both clamped below at minClamp, KL = Σ_k e^{t_k}(t_k − s_k), clamped at 0 (top-k masses do not
//     sum to 1). out [3, m·R]: KL, student mass Σ e^{s_k} and teacher mass Σ e^{t_k} (both unclamped); coefs
//     (m, R, K): c_k = e^{t_k}, 0 where s_k was clamped or KL < 0, so d KL / d z_j = Σ_k c_k (q_j − [j = id_k]) / T.
//     Masked tokens: zeros. v1: one thread per token.
//   pairs: that gradient times u = d loss / d KL (lossGrad, from distillation-loss) as the fused LM-head
//     backward takes it: its dlogits gives g·([j = target] − q_j)/T for g = grads.x, so grads.x −= u·Σc and the
//     pairs (target, u·Σc / T), (id_k, −u·c_k / T) at the token's position complete it (lm-head-sparse.wgsl).
//     pairIds / pairCoefs (m·S, K + 1) must hold zeros at the other positions. v1: one thread per token.

fn tokenPosition(i: u32) -> u32 {
  let b = i / params.R;
  return b * params.S + params.S - params.R - 1u + i % params.R;
}

//// logits
@compute @workgroup_size(64)
fn logits(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lane: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lane;
  if (i >= params.m * params.R || mask[i] == 0.0) { return; }
  let pos = tokenPosition(i);
  if (pos < params.h0 || pos >= params.h0 + params.hiddenRows) { return; }
  let hiddenRow = (pos - params.h0) * params.C;
  for (var k = 0u; k < params.K; k++) {
    let id = teacherIds[i * params.K + k];
    if (id < params.v0 || id >= params.v0 + params.width) { continue; }
    let row = (id - params.v0) * params.C;
    var z = 0.0;
    for (var c = 0u; c < params.C; c++) { z += hidden[hiddenRow + c] * weightAt(row + c); }
    coefs[i * params.K + k] = z;
  }
}

//// kl
@compute @workgroup_size(64)
fn kl(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
      @builtin(local_invocation_index) lane: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lane;
  let tokens = params.m * params.R;
  if (i >= tokens) { return; }
  let K = params.K;
  if (mask[i] == 0.0) {
    out[i] = 0.0;
    out[tokens + i] = 0.0;
    out[2u * tokens + i] = 0.0;
    for (var k = 0u; k < K; k++) { coefs[i * K + k] = 0.0; }
    return;
  }
  let pos = tokenPosition(i);
  let rowLse = lse[pos];
  var total = 0.0;
  var studentMass = 0.0;
  var teacherMass = 0.0;
  for (var k = 0u; k < K; k++) {
    let rawS = coefs[i * K + k] * params.invTemperature - rowLse;
    let rawT = teacherLogProbs[i * K + k];
    studentMass += exp(rawS);
    teacherMass += exp(rawT);
    let s = max(rawS, params.minClamp);
    let t = max(rawT, params.minClamp);
    let p = exp(t);
    total += p * (t - s);
    coefs[i * K + k] = select(0.0, p, rawS >= params.minClamp);
  }
  if (total < 0.0) {
    for (var k = 0u; k < K; k++) { coefs[i * K + k] = 0.0; }
  }
  out[i] = max(total, 0.0);
  out[tokens + i] = studentMass;
  out[2u * tokens + i] = teacherMass;
}

//// pairs
@compute @workgroup_size(64)
fn pairs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lane: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lane;
  if (i >= params.m * params.R) { return; }
  let u = lossGrad[i];
  if (u == 0.0) { return; }
  let K = params.K;
  let pos = tokenPosition(i);
  let first = pos * (K + 1u);
  var total = 0.0;
  for (var k = 0u; k < K; k++) {
    let c = coefs[i * K + k];
    total += c;
    pairIds[first + 1u + k] = teacherIds[i * K + k];
    pairCoefs[first + 1u + k] = -u * c * params.invTemperature;
  }
  pairIds[first] = targets[pos];
  pairCoefs[first] = u * total * params.invTemperature;
  grads[i] = vec2<f32>(grads[i].x - u * total, grads[i].y);
}
