// matmul's B loads for an int8 B (a frozen LoRA base in LLM.int8's weight format, engine/int8.ts): the weight W
// [out, in] holds signed bytes, four a u32 word little-endian, and bScale one float32 absmax (SCB) per row of W;
// element i of W is (code · SCB[row]) · 1/127, bitsandbytes' int8_vectorwise_dequant, in float32. B's flat index is
// W's own row-major index in both layouts that read it (nt: B [N, K] = W; nn: B [K, N] = W for dY·W), so W's row
// is i / K in nt and i / N in nn.
// Bindings: b and b4 as u32 words (4 elements each; b4 the same memory), bScale the row scales: the whole weight's,
// b's first row being row params.bFirstScale (a window of the weight's rows).

const INT8_DEQUANT_SCALE = 7.874015718698502e-3f;

fn weightRowLength() -> u32 { return select(params.N, params.K, B_K_CONTIGUOUS); }

fn int8At(word: u32, j: u32) -> f32 { return f32(bitcast<i32>(word << (24u - 8u * j)) >> 24u); }

fn bElement(i: u32) -> f32 {
  return int8At(b[i >> 2u], i & 3u) * bScale[params.bFirstScale + i / weightRowLength()] * INT8_DEQUANT_SCALE;
}

// Elements 4q .. 4q + 3: one word, inside one row of W (B_VEC4 means its rows are whole vec4s).
fn bQuad(q: u32) -> vec4<f32> {
  let w = b4[q];
  let codes = vec4<f32>(int8At(w, 0u), int8At(w, 1u), int8At(w, 2u), int8At(w, 3u));
  return codes * bScale[params.bFirstScale + 4u * q / weightRowLength()] * INT8_DEQUANT_SCALE;
}
