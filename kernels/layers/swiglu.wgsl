// swiglu: HF LlamaMLP activation on the fused gate/up projection, gate columns [0, I), up columns [I, 2I).
//   forward:  out[r, i] = silu(g) * u, g = gateUp[r, i], u = gateUp[r, I + i]      gateUp (rows, 2I), out (rows, I)
//   backward: dGateUp[r, i] = dOut * u * s * (1 + g * (1 - s)), dGateUp[r, I + i] = dOut * silu(g), s = sigmoid(g)
// v1: one lane per vecN of the I axis (vec4 when I % 4 == 0), 256 lanes, workgroups folded into y.

fn sigmoid(g: vecN) -> vecN {
  return 1.0 / (1.0 + exp(-g));
}

// Lane -> (row, column in vecN units); false for the idle lanes of the last workgroup.
fn locate(gid: vec3<u32>, nwg: vec3<u32>, at: ptr<function, vec2<u32>>) -> bool {
  let idx = gid.x + gid.y * nwg.x * 256u;
  let cols = params.I / VW;
  if (idx >= params.rows * cols) { return false; }
  *at = vec2<u32>(idx / cols, idx % cols);
  return true;
}

//// forward
@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  var at: vec2<u32>;
  if (!locate(gid, nwg, &at)) { return; }
  let cols = params.I / VW;
  let gateAt = at.x * 2u * cols + at.y;
  let g = gateUp[gateAt];
  out[at.x * cols + at.y] = g * sigmoid(g) * gateUp[gateAt + cols];
}

//// backward
@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  var at: vec2<u32>;
  if (!locate(gid, nwg, &at)) { return; }
  let cols = params.I / VW;
  let gateAt = at.x * 2u * cols + at.y;
  let g = gateUp[gateAt];
  let u = gateUp[gateAt + cols];
  let d = dOut[at.x * cols + at.y];
  let s = sigmoid(g);
  dGateUp[gateAt] = d * u * s * (1.0 + g * (1.0 - s));
  dGateUp[gateAt + cols] = d * g * s;
}
