// CPU reference of kernels/decode/decode-layer (float64): one decoder layer of a decode step written with the
// references of the kernels the separate path runs, in its order: rmsnorm, the qkv projection (+ bias), Qwen3's q/k
// norm, RoPE, the cache write and attention of decode-attention, o_proj (+ bias) into the residual, rmsnorm, gate_up,
// swiglu, down_proj into the residual. Weights as stored (N, K), not transposed. Inference only: no backward.
import { rmsnormForwardRef } from '../layers/rmsnorm.ref.ts';
import { matmulForwardRef } from '../matmul/matmul.ref.ts';
import { headRmsnormForwardRef } from '../layers/head-rmsnorm.ref.ts';
import { ropeForwardRef } from '../layers/rope.ref.ts';
import { decodeAttentionRef } from './decode-attention.ref.ts';
import { swigluForwardRef } from '../layers/swiglu.ref.ts';

export interface DecodeLayerRefArgs {
  x: ArrayLike<number>;
  qkvWeight: ArrayLike<number>;
  oWeight: ArrayLike<number>;
  gateUpWeight: ArrayLike<number>;
  downWeight: ArrayLike<number>;
  inputNorm: ArrayLike<number>;
  postNorm: ArrayLike<number>;
  qkNorm?: { q: ArrayLike<number>; k: ArrayLike<number> };
  qkvBias?: ArrayLike<number>;
  oBias?: ArrayLike<number>;
  positions: ArrayLike<number>;
  theta: number;
  kCache: ArrayLike<number>;
  vCache: ArrayLike<number>;
  keyMask: ArrayLike<number>;
  B: number;
  C: number;
  NH: number;
  NKV: number;
  HS: number;
  I: number;
  capacity: number;
  slot: number;
  maskBatchStride: number;
  eps: number;
  scale: number;
}

export function decodeLayerRef(a: DecodeLayerRefArgs): { x: Float64Array; kCache: Float64Array; vCache: Float64Array } {
  const { B, C, NH, NKV, HS, I, eps } = a;
  const W = (NH + 2 * NKV) * HS;
  const normed = rmsnormForwardRef({ x: a.x, weight: a.inputNorm, rows: B, cols: C, eps }).out;
  let qkv = matmulForwardRef({ a: normed, b: a.qkvWeight, M: B, N: W, K: C, layout: 'nt', bias: a.qkvBias });
  if (a.qkNorm)
    qkv = headRmsnormForwardRef({ qkv, qWeight: a.qkNorm.q, kWeight: a.qkNorm.k, rows: B, NH, NKV, HS, eps }).out;
  qkv = ropeForwardRef({ qkv, positions: a.positions, rows: B, NH, NKV, HS, theta: a.theta });
  const attention = decodeAttentionRef({ ...a, qkv });
  const afterAttention = matmulForwardRef({
    a: attention.out,
    b: a.oWeight,
    M: B,
    N: C,
    K: NH * HS,
    layout: 'nt',
    bias: a.oBias,
    out: a.x,
    accumulate: true,
  });
  const postNormed = rmsnormForwardRef({ x: afterAttention, weight: a.postNorm, rows: B, cols: C, eps }).out;
  const gateUp = matmulForwardRef({ a: postNormed, b: a.gateUpWeight, M: B, N: 2 * I, K: C, layout: 'nt' });
  const act = swigluForwardRef({ gateUp, rows: B, I });
  const x = matmulForwardRef({
    a: act,
    b: a.downWeight,
    M: B,
    N: C,
    K: I,
    layout: 'nt',
    out: afterAttention,
    accumulate: true,
  });
  return { x, kCache: attention.kCache, vCache: attention.vCache };
}
