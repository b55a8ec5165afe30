// Shared by every matmul variant: out[m, n] = alpha·sum (+ bias[n]) (+ out[m, n]), one element.
// The caller has checked m < M and n < N.
fn storeOutput(m: u32, n: u32, sum: f32) {
  let index = m * params.N + n;
  var value = params.alpha * sum;
  if (params.hasBias != 0u) { value += bias[n]; }
  if (params.accumulate != 0u) { value += out[index]; }
  out[index] = value;
}
