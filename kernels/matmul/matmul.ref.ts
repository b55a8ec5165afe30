// CPU reference of kernels/matmul/matmul: out = alpha·op(A)·op(B) (+ bias) (+ out), computed in float64.
// Shapes per layout: nn A[M,K]·B[K,N]; nt A[M,K]·B[N,K]ᵀ; tn A[K,M]ᵀ·B[K,N]; out and dout [M,N], bias [N].
// The backward is written with the forward itself: every gradient of a product is another product, which is
// exactly how the model calls the GPU kernel (dx = dy·W is nn, dW = dyᵀ·x is tn).
import type { MatmulLayout } from './matmul.ts';

export interface MatmulRefArgs {
  a: ArrayLike<number>;
  b: ArrayLike<number>;
  M: number;
  N: number;
  K: number;
  layout: MatmulLayout;
  bias?: ArrayLike<number>;
  /** The previous contents of out, added when accumulate is set. */
  out?: ArrayLike<number>;
  accumulate?: boolean;
  alpha?: number;
}

export interface MatmulRefGrads {
  /** Shaped like a. */
  da: Float64Array;
  /** Shaped like b. */
  db: Float64Array;
  /** [N] when the forward had a bias. */
  dbias?: Float64Array;
}

export function matmulForwardRef(args: MatmulRefArgs): Float64Array {
  const { a, b, M, N, K, layout, bias, accumulate = false, alpha = 1 } = args;
  if (accumulate && !args.out) throw new Error('matmulForwardRef: accumulate needs the previous out');
  // Element strides of A as [M,K] and of B as [K,N], whatever their storage layout.
  const [aRow, aCol] = layout === 'tn' ? [1, M] : [K, 1];
  const [bRow, bCol] = layout === 'nt' ? [1, K] : [N, 1];
  const result = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum += a[m * aRow + k * aCol] * b[k * bRow + n * bCol];
      let value = alpha * sum;
      if (bias) value += bias[n];
      if (accumulate) value += args.out![m * N + n];
      result[m * N + n] = value;
    }
  }
  return result;
}

/** Gradients of Σ dout∘out with respect to a, b and bias (accumulate adds out's old value, whose gradient is dout). */
export function matmulBackwardRef(args: MatmulRefArgs & { dout: ArrayLike<number> }): MatmulRefGrads {
  const { a, b, M, N, K, layout, bias, dout, alpha = 1 } = args;
  let da: Float64Array;
  let db: Float64Array;
  if (layout === 'nn') {
    da = matmulForwardRef({ a: dout, b, M, N: K, K: N, layout: 'nt', alpha }); // dout[M,N]·B[K,N]ᵀ
    db = matmulForwardRef({ a, b: dout, M: K, N, K: M, layout: 'tn', alpha }); // A[M,K]ᵀ·dout[M,N]
  } else if (layout === 'nt') {
    da = matmulForwardRef({ a: dout, b, M, N: K, K: N, layout: 'nn', alpha }); // dout[M,N]·B[N,K]
    db = matmulForwardRef({ a: dout, b: a, M: N, N: K, K: M, layout: 'tn', alpha }); // dout[M,N]ᵀ·A[M,K]
  } else {
    da = matmulForwardRef({ a: b, b: dout, M: K, N: M, K: N, layout: 'nt', alpha }); // B[K,N]·dout[M,N]ᵀ
    db = matmulForwardRef({ a, b: dout, M: K, N, K: M, layout: 'nn', alpha }); // A[K,M]·dout[M,N]
  }
  if (!bias) return { da, db };
  const dbias = new Float64Array(N);
  for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) dbias[n] += dout[m * N + n];
  return { da, db, dbias };
}
