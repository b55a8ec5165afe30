// matmul's B loads for an f16 B read natively (`enable f16`, devices with shader-f16): matmul-b-half.wgsl's
// loads without the unpacking — b as f16 elements, b4 as vec4<f16> (4 per load); float32 arithmetic.

fn bElement(i: u32) -> f32 { return f32(b[i]); }

fn bQuad(q: u32) -> vec4<f32> { return vec4<f32>(b4[q]); }
