// loss-partials: sums per-row loss partials [B, K] over rows into out [K], in a fixed order (deterministic,
// no atomics); columns whose bit is set in ratioMask become count / (Σ column denCol + 1e-8), verl's
// masked_mean of a 0/1 flag (clip fractions, ppo_kl). Needs workgroup-reduce.wgsl prepended.
// v1: one 256-lane workgroup, lanes stride over rows, one tree reduction per column.

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
  var denominator = 0.0;
  for (var k = 0u; k < params.K; k = k + 1u) {
    var acc = 0.0;
    for (var b = lid; b < params.B; b = b + 256u) { acc = acc + partials[b * params.K + k]; }
    let total = workgroupSum4(lid, 256u, vec4<f32>(acc, 0.0, 0.0, 0.0)).x;
    if (k == params.denCol) { denominator = total; }
    if (lid == 0u) { out[k] = total; }
  }
  if (lid == 0u) {
    for (var k = 0u; k < params.K; k = k + 1u) {
      if ((params.ratioMask & (1u << k)) != 0u) { out[k] = out[k] / (denominator + 1e-8); }
    }
  }
}
