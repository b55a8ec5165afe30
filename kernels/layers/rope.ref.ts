// CPU reference of kernels/layers/rope (float64 rotation): HF rotate_half RoPE on the q and k heads of qkv. The angle
// is rounded like HF computes it (f32 inv_freq times f32 position); cos, sin and the rotation are float64.

/** HF's inv_freq = 1 / theta^(2i/HS), each step rounded to f32 as torch computes it in float32. */
function inverseFrequenciesRef(HS: number, theta: number): number[] {
  return Array.from({ length: HS / 2 }, (_, i) =>
    Math.fround(1 / Math.fround(Math.fround(theta) ** Math.fround((2 * i) / HS))),
  );
}

export interface RopeRefArgs {
  positions: ArrayLike<number>;
  rows: number;
  NH: number;
  NKV: number;
  HS: number;
  theta: number;
  rowStride?: number;
  colOffset?: number;
}

function rotateRef(data: ArrayLike<number>, a: RopeRefArgs, sinSign: number): Float64Array {
  const { positions, rows, NH, NKV, HS, theta } = a;
  const rowStride = a.rowStride ?? (NH + 2 * NKV) * HS;
  const colOffset = a.colOffset ?? 0;
  const invFreq = inverseFrequenciesRef(HS, theta);
  const out = Float64Array.from(data);
  const half = HS / 2;
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(Math.fround(positions[r]) * invFreq[i]);
      const c = Math.cos(angle);
      const s = sinSign * Math.sin(angle);
      for (let h = 0; h < NH + NKV; h++) {
        const at = r * rowStride + colOffset + h * HS + i;
        const [x1, x2] = [out[at], out[at + half]];
        out[at] = x1 * c - x2 * s;
        out[at + half] = x2 * c + x1 * s;
      }
    }
  }
  return out;
}

/** qkv with its q and k heads rotated; everything else (v heads, other rows) copied. */
export function ropeForwardRef(a: RopeRefArgs & { qkv: ArrayLike<number> }): Float64Array {
  return rotateRef(a.qkv, a, 1);
}

/** dQkv with its q and k heads rotated by -angle: the gradient through ropeForwardRef. */
export function ropeBackwardRef(a: RopeRefArgs & { dQkv: ArrayLike<number> }): Float64Array {
  return rotateRef(a.dQkv, a, -1);
}
