// The scale of NF4 block `block` under double quantization (engine/nf4.ts compressNf4Statistics): bAbsmax is u32
// words holding the signed 8-bit dynamic map (256 float32 bit patterns), then one code byte per block (four a word,
// little-endian), then per 256 blocks their absmax and offset (float32 bits). The scale is map[code] · absmax₂ +
// offset, bitsandbytes' dequantize_blockwise and `absmax += offset` (which round after the product: a compiler
// that fuses them into one fma differs by at most an ulp of the scale).
fn blockAbsmax(block: u32) -> f32 {
  // The codes fill ceil(blocks / 4) words after the map (params.bScales: the whole weight's blocks).
  let pairs = 256u + (params.bScales + 3u) / 4u;
  let code = (bAbsmax[256u + (block >> 2u)] >> (8u * (block & 3u))) & 0xffu;
  let pair = pairs + 2u * (block / 256u);
  return bitcast<f32>(bAbsmax[code]) * bitcast<f32>(bAbsmax[pair]) + bitcast<f32>(bAbsmax[pair + 1u]);
}
