// matmul's B loads for a float32 B (prepended to every matmul variant; matmul-b-half.wgsl is the bf16/f16 twin).
// Bindings: b as f32 elements, b4 the same memory as vec4s.

const B_HALF = false;

// Element i of B.
fn bElement(i: u32) -> f32 { return b[i]; }

// Elements 4·q .. 4·q + 3 of B.
fn bQuad(q: u32) -> vec4<f32> { return b4[q]; }

// Elements 8·o .. 8·o + 7 of B as two vec4s: the half path's wide load; float32 B never takes that path.
fn bOctet(o: u32) -> mat2x4<f32> { return mat2x4<f32>(b4[2u * o], b4[2u * o + 1u]); }
