// CPU reference of the whole decoder trunk (float64), composed from the per-op references in the same order as
// models/decoder.ts schedules the GPU kernels: the ground truth for "GPU forward and parameter gradients match
// the CPU model". Parameters are named as the engine's arena names them (fused qkv_proj, gate_up_proj).
import type { DecoderConfig } from '../hf-config.ts';
import { layerPrefix, qkvWidth } from '../parameter-layout.ts';
import type { AttentionDims } from '../../kernels/attention/attention.ts';
import { matmulForwardRef } from '../../kernels/matmul/matmul.ref.ts';
import { embeddingForwardRef, embeddingBackwardRef } from '../../kernels/layers/embedding.ref.ts';
import { rmsnormForwardRef, rmsnormBackwardRef } from '../../kernels/layers/rmsnorm.ref.ts';
import { headRmsnormForwardRef, headRmsnormBackwardRef } from '../../kernels/layers/head-rmsnorm.ref.ts';
import { ropeForwardRef, ropeBackwardRef } from '../../kernels/layers/rope.ref.ts';
import { attentionForwardRef, attentionBackwardRef } from '../../kernels/attention/attention.ref.ts';
import { swigluForwardRef, swigluBackwardRef } from '../../kernels/layers/swiglu.ref.ts';

export type ParameterValues = ReadonlyMap<string, ArrayLike<number>>;

export interface ReferenceBatch {
  B: number;
  T: number;
  ids: ArrayLike<number>; //       (B·T)
  keyMask: ArrayLike<number>; //   (B·T)
  positions: ArrayLike<number>; // (B·T)
}

type F64 = Float64Array<ArrayBufferLike>;

interface LayerTape {
  input: F64;
  attnNormed: F64;
  attnRstd: F64;
  qkvRaw: F64;
  qkvRstd: F64;
  qkv: F64;
  attnOut: F64;
  mid: F64;
  mlpNormed: F64;
  mlpRstd: F64;
  gateUp: F64;
  act: F64;
}

export interface ReferenceForward {
  hidden: Float64Array; // (R, C) final normed hidden state
  tape: { layers: LayerTape[]; output: Float64Array; finalRstd: Float64Array };
}

function get(params: ParameterValues, name: string): ArrayLike<number> {
  const value = params.get(name);
  if (!value) throw new Error(`reference decoder: parameter ${name} missing`);
  return value;
}

function add(a: Float64Array, b: ArrayLike<number>): Float64Array {
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] + b[i];
  return out;
}

function attentionDims(c: DecoderConfig, B: number, T: number): AttentionDims {
  const W = qkvWidth(c);
  return {
    B,
    Tq: T,
    Tk: T,
    NH: c.numHeads,
    NKV: c.numKvHeads,
    HS: c.headDim,
    qRowStride: W,
    qColOffset: 0,
    kRowStride: W,
    kColOffset: c.numHeads * c.headDim,
    vRowStride: W,
    vColOffset: (c.numHeads + c.numKvHeads) * c.headDim,
    kvBatchStride: T * W,
    queryStart: 0,
    scale: 1 / Math.sqrt(c.headDim),
  };
}

/** `residual`: what the residual stream entering each layer and the final norm becomes (mixed precision: rounded to the
 *  compute dtype, models/decoder.ts roundResidual; the backward takes its gradient as the identity's). */
export function decoderForwardRef(
  c: DecoderConfig,
  params: ParameterValues,
  batch: ReferenceBatch,
  residual: (x: Float64Array) => Float64Array = (x) => x,
): ReferenceForward {
  const { B, T } = batch;
  const R = B * T;
  const C = c.hiddenSize;
  const W = qkvWidth(c);
  const I = c.intermediateSize;
  const shape = { rows: R, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim };
  const dims = attentionDims(c, B, T);
  let x = residual(
    embeddingForwardRef({
      ids: batch.ids,
      table: get(params, 'model.embed_tokens.weight'),
      N: R,
      V: c.vocabSize,
      C,
    }),
  );
  const layers: LayerTape[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const p = layerPrefix(l);
    const n1 = rmsnormForwardRef({
      x,
      weight: get(params, `${p}.input_layernorm.weight`),
      rows: R,
      cols: C,
      eps: c.rmsNormEps,
    });
    const qkvRaw = matmulForwardRef({
      a: n1.out,
      b: get(params, `${p}.self_attn.qkv_proj.weight`),
      M: R,
      N: W,
      K: C,
      layout: 'nt',
      bias: c.attentionBias ? get(params, `${p}.self_attn.qkv_proj.bias`) : undefined,
    });
    let normedQkv: F64 = qkvRaw;
    let qkvRstd: F64 = new Float64Array(0);
    if (c.qkNorm) {
      const normed = headRmsnormForwardRef({
        ...shape,
        qkv: qkvRaw,
        qWeight: get(params, `${p}.self_attn.q_norm.weight`),
        kWeight: get(params, `${p}.self_attn.k_norm.weight`),
        eps: c.rmsNormEps,
      });
      normedQkv = normed.out;
      qkvRstd = normed.rstd;
    }
    const qkv = ropeForwardRef({ ...shape, qkv: normedQkv, positions: batch.positions, theta: c.ropeTheta });
    const attn = attentionForwardRef({ ...dims, q: qkv, k: qkv, v: qkv, keyMask: batch.keyMask });
    const projected = matmulForwardRef({
      a: attn.out,
      b: get(params, `${p}.self_attn.o_proj.weight`),
      M: R,
      N: C,
      K: c.numHeads * c.headDim,
      layout: 'nt',
      bias: c.outputBias ? get(params, `${p}.self_attn.o_proj.bias`) : undefined,
    });
    const mid = add(x, projected);
    const n2 = rmsnormForwardRef({
      x: mid,
      weight: get(params, `${p}.post_attention_layernorm.weight`),
      rows: R,
      cols: C,
      eps: c.rmsNormEps,
    });
    const gateUp = matmulForwardRef({
      a: n2.out,
      b: get(params, `${p}.mlp.gate_up_proj.weight`),
      M: R,
      N: 2 * I,
      K: C,
      layout: 'nt',
    });
    const act = swigluForwardRef({ gateUp, rows: R, I });
    const down = matmulForwardRef({
      a: act,
      b: get(params, `${p}.mlp.down_proj.weight`),
      M: R,
      N: C,
      K: I,
      layout: 'nt',
    });
    layers.push({
      input: x,
      attnNormed: n1.out,
      attnRstd: n1.rstd,
      qkvRaw,
      qkvRstd,
      qkv,
      attnOut: attn.out,
      mid,
      mlpNormed: n2.out,
      mlpRstd: n2.rstd,
      gateUp,
      act,
    });
    x = residual(add(mid, down));
  }
  const final = rmsnormForwardRef({ x, weight: get(params, 'model.norm.weight'), rows: R, cols: C, eps: c.rmsNormEps });
  return { hidden: final.out, tape: { layers, output: x, finalRstd: final.rstd } };
}

/** Parameter gradients (arena names) of Σ dHidden ∘ hidden for the forward `f`. */
export function decoderBackwardRef(
  c: DecoderConfig,
  params: ParameterValues,
  batch: ReferenceBatch,
  f: ReferenceForward,
  dHidden: ArrayLike<number>,
): Map<string, Float64Array> {
  const { B, T } = batch;
  const R = B * T;
  const C = c.hiddenSize;
  const W = qkvWidth(c);
  const I = c.intermediateSize;
  const NHS = c.numHeads * c.headDim;
  const shape = { rows: R, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim };
  const dims = attentionDims(c, B, T);
  const grads = new Map<string, Float64Array>();
  const accumulate = (name: string, g: ArrayLike<number>) => {
    const existing = grads.get(name);
    if (existing) for (let i = 0; i < existing.length; i++) existing[i] += g[i];
    else grads.set(name, Float64Array.from(g));
  };
  const columnSums = (m: Float64Array, cols: number) => {
    const s = new Float64Array(cols);
    for (let i = 0; i < m.length; i++) s[i % cols] += m[i];
    return s;
  };

  const finalGrad = rmsnormBackwardRef({
    x: f.tape.output,
    weight: get(params, 'model.norm.weight'),
    rstd: f.tape.finalRstd,
    dOut: dHidden,
    rows: R,
    cols: C,
  });
  accumulate('model.norm.weight', finalGrad.dWeight);
  let dx = finalGrad.dx;
  for (let l = c.numLayers - 1; l >= 0; l--) {
    const p = layerPrefix(l);
    const a = f.tape.layers[l];
    const dAct = matmulForwardRef({
      a: dx,
      b: get(params, `${p}.mlp.down_proj.weight`),
      M: R,
      N: I,
      K: C,
      layout: 'nn',
    });
    accumulate(`${p}.mlp.down_proj.weight`, matmulForwardRef({ a: dx, b: a.act, M: C, N: I, K: R, layout: 'tn' }));
    const dGateUp = swigluBackwardRef({ gateUp: a.gateUp, dOut: dAct, rows: R, I });
    const dN2 = matmulForwardRef({
      a: dGateUp,
      b: get(params, `${p}.mlp.gate_up_proj.weight`),
      M: R,
      N: C,
      K: 2 * I,
      layout: 'nn',
    });
    accumulate(
      `${p}.mlp.gate_up_proj.weight`,
      matmulForwardRef({ a: dGateUp, b: a.mlpNormed, M: 2 * I, N: C, K: R, layout: 'tn' }),
    );
    const n2 = rmsnormBackwardRef({
      x: a.mid,
      weight: get(params, `${p}.post_attention_layernorm.weight`),
      rstd: a.mlpRstd,
      dOut: dN2,
      rows: R,
      cols: C,
    });
    accumulate(`${p}.post_attention_layernorm.weight`, n2.dWeight);
    const dMid = add(dx, n2.dx);
    const dAttn = matmulForwardRef({
      a: dMid,
      b: get(params, `${p}.self_attn.o_proj.weight`),
      M: R,
      N: NHS,
      K: C,
      layout: 'nn',
    });
    accumulate(
      `${p}.self_attn.o_proj.weight`,
      matmulForwardRef({ a: dMid, b: a.attnOut, M: C, N: NHS, K: R, layout: 'tn' }),
    );
    if (c.outputBias) accumulate(`${p}.self_attn.o_proj.bias`, columnSums(dMid, C));
    const attnGrads = attentionBackwardRef({
      ...dims,
      q: a.qkv,
      k: a.qkv,
      v: a.qkv,
      keyMask: batch.keyMask,
      dOut: dAttn,
    });
    const dQkvRoped = new Float64Array(R * W);
    for (let i = 0; i < dQkvRoped.length; i++) dQkvRoped[i] = attnGrads.dq[i] + attnGrads.dk[i] + attnGrads.dv[i];
    let dProjection = ropeBackwardRef({ ...shape, dQkv: dQkvRoped, positions: batch.positions, theta: c.ropeTheta });
    if (c.qkNorm) {
      const normGrads = headRmsnormBackwardRef({
        ...shape,
        qkv: a.qkvRaw,
        qWeight: get(params, `${p}.self_attn.q_norm.weight`),
        kWeight: get(params, `${p}.self_attn.k_norm.weight`),
        rstd: a.qkvRstd,
        dOut: dProjection,
      });
      accumulate(`${p}.self_attn.q_norm.weight`, normGrads.dQWeight);
      accumulate(`${p}.self_attn.k_norm.weight`, normGrads.dKWeight);
      dProjection = normGrads.dQkv;
    }
    if (c.attentionBias) accumulate(`${p}.self_attn.qkv_proj.bias`, columnSums(dProjection, W));
    const dN1 = matmulForwardRef({
      a: dProjection,
      b: get(params, `${p}.self_attn.qkv_proj.weight`),
      M: R,
      N: C,
      K: W,
      layout: 'nn',
    });
    accumulate(
      `${p}.self_attn.qkv_proj.weight`,
      matmulForwardRef({ a: dProjection, b: a.attnNormed, M: W, N: C, K: R, layout: 'tn' }),
    );
    const n1 = rmsnormBackwardRef({
      x: a.input,
      weight: get(params, `${p}.input_layernorm.weight`),
      rstd: a.attnRstd,
      dOut: dN1,
      rows: R,
      cols: C,
    });
    accumulate(`${p}.input_layernorm.weight`, n1.dWeight);
    dx = add(dMid, n1.dx);
  }
  accumulate('model.embed_tokens.weight', embeddingBackwardRef({ ids: batch.ids, dOut: dx, N: R, V: c.vocabSize, C }));
  return grads;
}
