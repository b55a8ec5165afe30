// matmul's B loads for an NF4 B (a frozen LoRA base quantized as bitsandbytes does, engine/nf4.ts): B's flat
// element i is NF4[code i] · blockAbsmax(i / 64), dequantized to float32 as it is read; all arithmetic stays float32.
// The launcher prepends `NF4`, the 16 codes, and `blockAbsmax`: a float32 scale per block, or with double
// quantization map[8-bit code] · absmax₂ + offset (matmul-nf4-nested.wgsl). Codes are two per byte, the even
// element in the high nibble, four bytes per u32 word little-endian (bitsandbytes' byte order).
// Bindings: b and b4 as u32 words (8 elements each; b4 the same memory), bAbsmax the block statistics: those of the
// whole weight, b's first block being params.bFirstScale (a window of the weight's rows starts at a block).

fn bElement(i: u32) -> f32 {
  let byte = (b[i >> 3u] >> (8u * ((i >> 1u) & 3u))) & 0xffu;
  let code = select(byte & 15u, byte >> 4u, (i & 1u) == 0u);
  return NF4[code] * blockAbsmax(params.bFirstScale + i / 64u);
}

// Elements 4q .. 4q + 3: two bytes of one word, inside one block (64 is a multiple of 4).
fn bQuad(q: u32) -> vec4<f32> {
  let h = (b4[q >> 1u] >> (16u * (q & 1u))) & 0xffffu;
  let codes = vec4<f32>(NF4[(h >> 4u) & 15u], NF4[h & 15u], NF4[(h >> 12u) & 15u], NF4[(h >> 8u) & 15u]);
  return codes * blockAbsmax(params.bFirstScale + q / 16u);
}
