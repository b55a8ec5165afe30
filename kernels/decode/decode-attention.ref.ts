// CPU reference of kernels/decode/decode-attention (float64): exactly the cache write of
// kernels/decode/kv-cache-write.ref.ts followed by the general attention reference with one query per sequence at key
// position `slot`. Inference only: no backward.
import { kvCacheWriteRef } from './kv-cache-write.ref.ts';
import { attentionForwardRef, type AttentionQuery } from '../attention/attention.ref.ts';

/** `heads` ({b, h} pairs, every one when absent): the out rows to compute (gpu-report's sampled real-size check). */
export function decodeAttentionRef(
  a: {
    qkv: ArrayLike<number>;
    kCache: ArrayLike<number>;
    vCache: ArrayLike<number>;
    keyMask: ArrayLike<number>;
    B: number;
    NH: number;
    NKV: number;
    HS: number;
    capacity: number;
    slot: number;
    maskBatchStride: number;
    scale: number;
  },
  heads?: readonly { b: number; h: number }[],
): { out: Float64Array; kCache: Float64Array; vCache: Float64Array } {
  const { B, NH, NKV, HS, capacity, slot } = a;
  const cache = kvCacheWriteRef({ ...a, Tnew: 1, slotStart: slot });
  const kvWidth = NKV * HS;
  const { out } = attentionForwardRef(
    {
      B,
      Tq: 1,
      Tk: slot + 1,
      NH,
      NKV,
      HS,
      qRowStride: (NH + 2 * NKV) * HS,
      qColOffset: 0,
      kRowStride: kvWidth,
      kColOffset: 0,
      vRowStride: kvWidth,
      vColOffset: 0,
      kvBatchStride: capacity * kvWidth,
      maskBatchStride: a.maskBatchStride,
      queryStart: slot,
      scale: a.scale,
      q: a.qkv,
      k: cache.kCache,
      v: cache.vCache,
      keyMask: a.keyMask,
    },
    heads?.map(({ b, h }): AttentionQuery => ({ b, t: 0, h })),
  );
  return { out, ...cache };
}
