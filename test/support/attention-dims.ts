// AttentionDims for queries and keys/values in buffers of their own (a KV cache, or key windows gathered apart):
// q (B, Tq, NH·HS) and k, v (B, kvRows, NKV·HS), rows packed, sequence b's keys at row b·kvRows.
import type { AttentionDims } from '../../kernels/attention/attention.ts';

export function separateQkvDims(d: {
  B: number;
  Tq: number;
  Tk: number;
  NH: number;
  NKV: number;
  HS: number;
  /** Key rows a sequence holds (its cache's capacity, or Tk). */
  kvRows: number;
  queryStart: number;
  scale: number;
  maskBatchStride?: number;
}): AttentionDims {
  const { kvRows, ...dims } = d;
  const rowStride = d.NKV * d.HS;
  return {
    ...dims,
    qRowStride: d.NH * d.HS,
    qColOffset: 0,
    kRowStride: rowStride,
    kColOffset: 0,
    vRowStride: rowStride,
    vColOffset: 0,
    kvBatchStride: kvRows * rowStride,
  };
}
