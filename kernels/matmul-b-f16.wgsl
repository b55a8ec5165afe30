// matmul's B loads for an f16 B read natively (`enable f16`, devices with shader-f16): matmul-b-half.wgsl's
// loads without the unpacking — b as vec4<f16> (4 elements per load), b4 as mat2x4<f16> (8); float32 arithmetic.

const B_HALF = true;

fn bElement(i: u32) -> f32 { return f32(b[i / 4u][i % 4u]); }

fn bQuad(q: u32) -> vec4<f32> { return vec4<f32>(b[q]); }

fn bOctet(o: u32) -> mat2x4<f32> { return mat2x4<f32>(b4[o]); }
