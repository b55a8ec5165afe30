// matmul's B loads for a float32 B (prepended to every matmul variant; matmul-b-half.wgsl is the bf16/f16 twin).
// Bindings: b as f32 elements, b4 the same memory as vec4s.

// Element i of B.
fn bElement(i: u32) -> f32 { return b[i]; }

// Elements 4·q .. 4·q + 3 of B.
fn bQuad(q: u32) -> vec4<f32> { return b4[q]; }
