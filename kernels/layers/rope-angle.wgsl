// Shared by rope.wgsl and decode-attention.wgsl (prepended by their launchers, after the vecN prelude).

// 2π split so that k * TWO_PI_HI and k * TWO_PI_MID are exact in f32 for |k| < 2^16 (8 significant bits each).
const TWO_PI_HI = 6.28125;
const TWO_PI_MID = 0.00193023681640625;
const TWO_PI_LO = 5.070363386e-6;

// Angle reduced to [-π, π]. GPU sin/cos are only specified to absolute error 2^-11 on [-π, π] and degrade far
// outside it, while angles reach position * 1 radian; reducing with a three-part 2π keeps positions up to ~400k
// accurate to f32 rounding.
fn reduceAngle(a: vecN) -> vecN {
  let k = round(a * 0.15915494309189535);
  return ((a - k * TWO_PI_HI) - k * TWO_PI_MID) - k * TWO_PI_LO;
}
