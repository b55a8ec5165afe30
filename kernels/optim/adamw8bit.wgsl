// adamw8bit: one step of bitsandbytes' AdamW8bit over one parameter tensor (csrc/kernels.cu
// kOptimizerStatic8bit2StateBlockwise with OPTIMIZER = ADAM, BLOCK_SIZE 256), both moments in the blockwise 8-bit
// dynamic code (kernels/optim/dynamic-map.ts), after clip_grad_norm_ scaling read from the GPU as adamw.wgsl does.
// param, grad: (n4) vec4 (n elements, the arena pads to whole vec4s); state1 (m), state2 (v): (ceil(n/4)) u32, four
// codes per word, element 4w+j in byte j; absmax1, absmax2: (ceil(n/256)) one scale per block of 256;
// qmap: (512) the signed code (for m) then the unsigned one (for v); normSquared: (1) = Σ g² over all segments.
// Per block: m ← β1·code1[c1]·absmax1 + (1−β1)·g, v ← β2·code2[c2]·absmax2 + (1−β2)·g·g; absmax ← the block's
// max |m| and max |v|; p ← (p + stepSize·m / (√v + c2·eps))·decay with stepSize = −lr·√(1−β2^t)/(1−β1^t) and
// decay = 1 − lr·wd (bitsandbytes decays after the step, torch.optim.AdamW before); codes ← the nearest code of
// m/absmax (bitsandbytes' quantize_2D binary search, then the code moved one step where its sign differs from m's)
// and of v/absmax. Elements past n read as bitsandbytes' padding (g 0, codes 128 and 0), count in the block's
// absmax as there, and store zero codes. A zero absmax stores the codes bitsandbytes' NaN quotient gives (m: 255
// after the sign step, v: 0), which dequantize to 0 like any other. A non-finite normSquared skips the update.
// v1: one workgroup per block, 64 lanes × 4 elements, both codes in workgroup memory.

// The signed code at 0..255, the unsigned one at 256..511, as in qmap.
var<workgroup> codes: array<f32, 512>;
var<workgroup> max1: array<f32, 64>;
var<workgroup> max2: array<f32, 64>;

// bitsandbytes' quantize_2D: binary search over the sorted code from the middle, then the nearer of the last
// values visited on either side (ties to the searched value); the code starts at codes[at], `lowest` is what stands
// below its first value.
fn quantize(at: u32, x: f32, lowest: f32) -> u32 {
  var pivot = 127u;
  var upperPivot = 255u;
  var lowerPivot = 0u;
  var lower = lowest;
  var upper = 1.0;
  var val = codes[at + 127u];
  for (var i = 64u; i > 0u; i = i >> 1u) {
    if (x > val) {
      lowerPivot = pivot;
      lower = val;
      pivot = pivot + i;
    } else {
      upperPivot = pivot;
      upper = val;
      pivot = pivot - i;
    }
    val = codes[at + pivot];
  }
  if (x > val) { return select(pivot, upperPivot, x > (upper + val) * 0.5); }
  return select(pivot, lowerPivot, x < (lower + val) * 0.5);
}

fn signBit(x: f32) -> u32 { return bitcast<u32>(x) >> 31u; }

@compute @workgroup_size(64)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_index) lane: u32,
) {
  for (var k = lane; k < 512u; k += 64u) { codes[k] = qmap[k]; }
  workgroupBarrier();
  let block = wid.x + wid.y * nwg.x;
  if (block >= params.blocks) { return; }
  // By its bits: WGSL lets a compiler assume floats are finite, so isNan-style comparisons may fold away.
  let skip = (bitcast<u32>(normSquared[0]) & 0x7f800000u) == 0x7f800000u;
  var clip = 1.0;
  if (params.maxNorm > 0.0) {
    clip = min(1.0, params.maxNorm / (abs(params.gradScale) * sqrt(normSquared[0]) + 1e-6));
  }
  let w = block * 64u + lane;
  let words = (params.n + 3u) / 4u;
  let inWords = w < words;
  var g = vec4<f32>(0.0);
  var c1 = 0x80808080u;
  var c2 = 0u;
  if (inWords) {
    g = grad[w] * (params.gradScale * clip);
    c1 = state1[w];
    c2 = state2[w];
  }
  let scale1 = absmax1[block];
  let scale2 = absmax2[block];
  var m = vec4<f32>(0.0);
  var v = vec4<f32>(0.0);
  var local1 = 0.0;
  var local2 = 0.0;
  for (var j = 0u; j < 4u; j++) {
    let valid = 4u * w + j < params.n;
    let gj = select(0.0, g[j], valid);
    let q1 = select(128u, (c1 >> (8u * j)) & 0xffu, valid);
    let q2 = select(0u, (c2 >> (8u * j)) & 0xffu, valid);
    v[j] = codes[256u + q2] * scale2 * params.beta2 + (1.0 - params.beta2) * gj * gj;
    m[j] = codes[q1] * scale1 * params.beta1 + (1.0 - params.beta1) * gj;
    local1 = max(local1, abs(m[j]));
    local2 = max(local2, abs(v[j]));
  }
  max1[lane] = local1;
  max2[lane] = local2;
  workgroupBarrier();
  for (var stride = 32u; stride > 0u; stride = stride >> 1u) {
    if (lane < stride) {
      max1[lane] = max(max1[lane], max1[lane + stride]);
      max2[lane] = max(max2[lane], max2[lane + stride]);
    }
    workgroupBarrier();
  }
  let new1 = max1[0];
  let new2 = max2[0];
  if (skip) { return; }
  if (lane == 0u) {
    absmax1[block] = new1;
    absmax2[block] = new2;
  }
  if (!inWords) { return; }
  var p = param[w];
  var out1 = 0u;
  var out2 = 0u;
  for (var j = 0u; j < 4u; j++) {
    if (4u * w + j >= params.n) { continue; }
    p[j] = (p[j] + params.stepSize * (m[j] / (sqrt(v[j]) + params.epsScaled))) * params.decay;
    var q1 = 0u;
    if (new1 > 0.0) { q1 = quantize(0u, m[j] / new1, -1.0); }
    if (signBit(codes[q1]) != signBit(m[j])) { q1 = select((q1 + 255u) & 0xffu, (q1 + 1u) & 0xffu, m[j] > 0.0); }
    var q2 = 0u;
    if (new2 > 0.0) { q2 = quantize(256u, v[j] / new2, 0.0); }
    out1 = out1 | (q1 << (8u * j));
    out2 = out2 | (q2 << (8u * j));
  }
  param[w] = p;
  state1[w] = out1;
  state2[w] = out2;
}
