// Shared snippet: max, Σ e^(z−max) and the softmax-weighted mean logit of one row of `logits` [N, V], by one
// 64-lane workgroup striding over V (needs workgroup-reduce.wgsl and bindings `logits`, uniform `V`).

struct Softmax { max: f32, sum: f32, meanLogit: f32 }

fn softmaxStats(lid: u32, base: u32) -> Softmax {
  var localMax = -3.4e38;
  for (var v = lid; v < params.V; v = v + 64u) { localMax = max(localMax, logits[base + v]); }
  let m = workgroupMax(lid, 64u, localMax);
  var acc = vec4<f32>(0.0);
  for (var v = lid; v < params.V; v = v + 64u) {
    let z = logits[base + v];
    let e = exp(z - m);
    acc = acc + vec4<f32>(e, e * z, 0.0, 0.0);
  }
  let total = workgroupSum4(lid, 64u, acc);
  return Softmax(m, total.x, total.y / total.x);
}
