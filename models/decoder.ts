// The decoder trunk of Llama / Qwen2 / Qwen3 as a schedule of kernels: embedding → L × (RMSNorm → fused qkv
// projection [+ bias] → [per-head q/k RMSNorm] → RoPE → causal GQA attention → o_proj + residual → RMSNorm →
// fused gate/up → SwiGLU → down_proj + residual) → final RMSNorm. The forward records what the backward needs;
// the backward walks the same schedule in reverse and accumulates parameter gradients into a gradient arena.
// Heads (LM head, value head, reward score) sit on top of the final hidden state and live in their own files.
import type { Engine, Tensor, Arena } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { layerPrefix, qkvWidth } from './parameter-layout.ts';
import type { TokenBatch } from './token-batch.ts';
import { uploadTokenIndex } from './token-batch.ts';
import { matmul } from '../kernels/matmul.ts';
import { embeddingForward, embeddingBackward } from '../kernels/embedding.ts';
import { rmsnormForward, rmsnormBackward } from '../kernels/rmsnorm.ts';
import { headRmsnormForward, headRmsnormBackward } from '../kernels/head-rmsnorm.ts';
import { ropeForward, ropeBackward } from '../kernels/rope.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../kernels/attention.ts';
import { swigluForward, swigluBackward } from '../kernels/swiglu.ts';

/** Per-layer activations kept for the backward pass: shapes use R = B·T rows. */
interface LayerActivations {
  input: Tensor; //        (R, C) residual stream entering the layer
  attnNormed: Tensor; //   (R, C)
  attnRstd: Tensor; //     (R)
  qkvRaw: Tensor; //       (R, W) projection output before q/k norm (Qwen3 only; otherwise same as qkv)
  qkvRstd: Tensor; //      (R, NH+NKV) Qwen3 only
  qkv: Tensor; //          (R, W) q, k after norm and RoPE; v
  attnOut: Tensor; //      (R, NH·HS)
  lse: Tensor; //          (B, NH, T)
  mid: Tensor; //          (R, C) residual after attention
  mlpNormed: Tensor; //    (R, C)
  mlpRstd: Tensor; //      (R)
  gateUp: Tensor; //       (R, 2I)
  act: Tensor; //          (R, I)
}

interface Workspace {
  B: number;
  T: number;
  layers: LayerActivations[];
  output: Tensor; //       (R, C) residual after the last layer
  finalNormed: Tensor; //  (R, C) the trunk's output
  finalRstd: Tensor; //    (R)
  // backward scratch
  dResidual: Tensor; //    (R, C)
  dNormed: Tensor; //      (R, C)
  dAct: Tensor; //         (R, I)
  dGateUp: Tensor; //      (R, 2I)
  dAttnOut: Tensor; //     (R, NH·HS)
  dQkv: Tensor; //         (R, W)
  dQkvRaw: Tensor; //      (R, W) Qwen3 only
  ones: Tensor; //         (R) column sums for the bias gradients
}

export interface DecoderForwardOptions {
  /** Keep every layer's activations for backward(); inference reuses one layer's buffers. */
  saveForBackward: boolean;
}

export class DecoderTrunk {
  private readonly workspaces = new Map<string, Workspace>();
  private lastForward: { batch: TokenBatch; workspace: Workspace; saved: boolean } | null = null;

  constructor(
    readonly engine: Engine,
    readonly config: DecoderConfig,
    readonly params: Arena,
  ) {}

  private param(name: string): Tensor {
    return this.params.get(name);
  }

  private workspace(B: number, T: number, saved: boolean): Workspace {
    const key = `${B}x${T}:${saved ? 'train' : 'infer'}`;
    const cached = this.workspaces.get(key);
    if (cached) return cached;
    const c = this.config;
    const e = this.engine;
    const R = B * T;
    const W = qkvWidth(c);
    const C = c.hiddenSize;
    const I = c.intermediateSize;
    const layer = (l: number): LayerActivations => {
      const n = (what: string) => `${key}.layer${l}.${what}`;
      const qkv = e.tensor(n('qkv'), [R, W]);
      return {
        input: e.tensor(n('input'), [R, C]),
        attnNormed: e.tensor(n('attnNormed'), [R, C]),
        attnRstd: e.tensor(n('attnRstd'), [R]),
        qkvRaw: c.qkNorm ? e.tensor(n('qkvRaw'), [R, W]) : qkv,
        qkvRstd: e.tensor(n('qkvRstd'), [c.qkNorm ? R * (c.numHeads + c.numKvHeads) : 1]),
        qkv,
        attnOut: e.tensor(n('attnOut'), [R, c.numHeads * c.headDim]),
        lse: e.tensor(n('lse'), [B, c.numHeads, T]),
        mid: e.tensor(n('mid'), [R, C]),
        mlpNormed: e.tensor(n('mlpNormed'), [R, C]),
        mlpRstd: e.tensor(n('mlpRstd'), [R]),
        gateUp: e.tensor(n('gateUp'), [R, 2 * I]),
        act: e.tensor(n('act'), [R, I]),
      };
    };
    const layers: LayerActivations[] = [];
    if (saved) for (let l = 0; l < c.numLayers; l++) layers.push(layer(l));
    else {
      // Inference: layer l's input is layer l−1's output; two sets of buffers alternate.
      const a = layer(0);
      const b = layer(1);
      for (let l = 0; l < c.numLayers; l++) layers.push(l % 2 === 0 ? a : b);
    }
    const ws: Workspace = {
      B,
      T,
      layers,
      output: e.tensor(`${key}.output`, [R, C]),
      finalNormed: e.tensor(`${key}.finalNormed`, [R, C]),
      finalRstd: e.tensor(`${key}.finalRstd`, [R]),
      dResidual: saved ? e.tensor(`${key}.dResidual`, [R, C]) : undefined!,
      dNormed: saved ? e.tensor(`${key}.dNormed`, [R, C]) : undefined!,
      dAct: saved ? e.tensor(`${key}.dAct`, [R, I]) : undefined!,
      dGateUp: saved ? e.tensor(`${key}.dGateUp`, [R, 2 * I]) : undefined!,
      dAttnOut: saved ? e.tensor(`${key}.dAttnOut`, [R, c.numHeads * c.headDim]) : undefined!,
      dQkv: saved ? e.tensor(`${key}.dQkv`, [R, W]) : undefined!,
      dQkvRaw: saved && c.qkNorm ? e.tensor(`${key}.dQkvRaw`, [R, W]) : undefined!,
      ones: saved && (c.attentionBias || c.outputBias) ? e.tensorFrom(`${key}.ones`, [R], new Float32Array(R).fill(1)) : undefined!,
    };
    this.workspaces.set(key, ws);
    return ws;
  }

  private attentionDims(B: number, T: number): AttentionDims {
    const c = this.config;
    const W = qkvWidth(c);
    return {
      B, Tq: T, Tk: T, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim,
      qRowStride: W, qColOffset: 0,
      kRowStride: W, kColOffset: c.numHeads * c.headDim,
      vRowStride: W, vColOffset: (c.numHeads + c.numKvHeads) * c.headDim,
      kvBatchStride: T * W,
      queryStart: 0,
      scale: 1 / Math.sqrt(c.headDim),
    };
  }

  /** Runs the trunk; returns the final normed hidden state (R, C), valid until the next forward of this shape. */
  forward(batch: TokenBatch, options: DecoderForwardOptions): Tensor {
    const c = this.config;
    const e = this.engine;
    const { B, T } = batch;
    const R = B * T;
    const C = c.hiddenSize;
    const W = qkvWidth(c);
    const I = c.intermediateSize;
    const ws = this.workspace(B, T, options.saveForBackward);
    const dims = this.attentionDims(B, T);

    embeddingForward(e, { ids: batch.ids, table: this.param('model.embed_tokens.weight'), out: ws.layers[0].input, N: R, V: c.vocabSize, C });
    for (let l = 0; l < c.numLayers; l++) {
      const p = layerPrefix(l);
      const a = ws.layers[l];
      const next = l + 1 < c.numLayers ? ws.layers[l + 1].input : ws.output;
      rmsnormForward(e, { x: a.input, weight: this.param(`${p}.input_layernorm.weight`), out: a.attnNormed, rstd: a.attnRstd, rows: R, cols: C, eps: c.rmsNormEps });
      matmul(e, {
        a: a.attnNormed, b: this.param(`${p}.self_attn.qkv_proj.weight`), out: a.qkvRaw, M: R, N: W, K: C, layout: 'nt',
        bias: c.attentionBias ? this.param(`${p}.self_attn.qkv_proj.bias`) : undefined,
      });
      if (c.qkNorm) {
        headRmsnormForward(e, {
          qkv: a.qkvRaw, qWeight: this.param(`${p}.self_attn.q_norm.weight`), kWeight: this.param(`${p}.self_attn.k_norm.weight`),
          out: a.qkv, rstd: a.qkvRstd, rows: R, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim, eps: c.rmsNormEps,
        });
      }
      ropeForward(e, { qkv: a.qkv, positions: batch.positions, rows: R, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim, theta: c.ropeTheta });
      attentionForward(e, { ...dims, q: a.qkv, k: a.qkv, v: a.qkv, keyMask: batch.keyMask, out: a.attnOut, lse: a.lse });
      e.copy(a.input, a.mid);
      matmul(e, {
        a: a.attnOut, b: this.param(`${p}.self_attn.o_proj.weight`), out: a.mid, M: R, N: C, K: c.numHeads * c.headDim, layout: 'nt', accumulate: true,
        bias: c.outputBias ? this.param(`${p}.self_attn.o_proj.bias`) : undefined,
      });
      rmsnormForward(e, { x: a.mid, weight: this.param(`${p}.post_attention_layernorm.weight`), out: a.mlpNormed, rstd: a.mlpRstd, rows: R, cols: C, eps: c.rmsNormEps });
      matmul(e, { a: a.mlpNormed, b: this.param(`${p}.mlp.gate_up_proj.weight`), out: a.gateUp, M: R, N: 2 * I, K: C, layout: 'nt' });
      swigluForward(e, { gateUp: a.gateUp, out: a.act, rows: R, I });
      e.copy(a.mid, next);
      matmul(e, { a: a.act, b: this.param(`${p}.mlp.down_proj.weight`), out: next, M: R, N: C, K: I, layout: 'nt', accumulate: true });
    }
    rmsnormForward(e, { x: ws.output, weight: this.param('model.norm.weight'), out: ws.finalNormed, rstd: ws.finalRstd, rows: R, cols: C, eps: c.rmsNormEps });
    this.lastForward = { batch, workspace: ws, saved: options.saveForBackward };
    return ws.finalNormed;
  }

  /**
   * Backward of the last forward (which must have saved activations) given dFinal = ∂loss/∂(final hidden) (R, C).
   * Parameter gradients are ADDED into `grads` (same layout as the parameters), so micro-batches accumulate.
   * `dFinal` may be overwritten.
   */
  backward(dFinal: Tensor, grads: Arena): void {
    if (!this.lastForward?.saved) throw new Error('DecoderTrunk.backward: the last forward did not save activations (saveForBackward)');
    const { batch, workspace: ws } = this.lastForward;
    const c = this.config;
    const e = this.engine;
    const { B, T } = batch;
    const R = B * T;
    const C = c.hiddenSize;
    const W = qkvWidth(c);
    const I = c.intermediateSize;
    const NHS = c.numHeads * c.headDim;
    const dims = this.attentionDims(B, T);
    const g = (name: string) => grads.get(name);

    rmsnormBackward(e, {
      x: ws.output, weight: this.param('model.norm.weight'), rstd: ws.finalRstd, dOut: dFinal, dx: ws.dResidual,
      dWeight: g('model.norm.weight'), rows: R, cols: C, accumulateDx: false, accumulateDWeight: true,
    });
    for (let l = c.numLayers - 1; l >= 0; l--) {
      const p = layerPrefix(l);
      const a = ws.layers[l];
      // MLP: next = mid + act·W_downᵀ
      matmul(e, { a: ws.dResidual, b: this.param(`${p}.mlp.down_proj.weight`), out: ws.dAct, M: R, N: I, K: C, layout: 'nn' });
      matmul(e, { a: ws.dResidual, b: a.act, out: g(`${p}.mlp.down_proj.weight`), M: C, N: I, K: R, layout: 'tn', accumulate: true });
      swigluBackward(e, { gateUp: a.gateUp, dOut: ws.dAct, dGateUp: ws.dGateUp, rows: R, I });
      matmul(e, { a: ws.dGateUp, b: this.param(`${p}.mlp.gate_up_proj.weight`), out: ws.dNormed, M: R, N: C, K: 2 * I, layout: 'nn' });
      matmul(e, { a: ws.dGateUp, b: a.mlpNormed, out: g(`${p}.mlp.gate_up_proj.weight`), M: 2 * I, N: C, K: R, layout: 'tn', accumulate: true });
      rmsnormBackward(e, {
        x: a.mid, weight: this.param(`${p}.post_attention_layernorm.weight`), rstd: a.mlpRstd, dOut: ws.dNormed, dx: ws.dResidual,
        dWeight: g(`${p}.post_attention_layernorm.weight`), rows: R, cols: C, accumulateDx: true, accumulateDWeight: true,
      });
      // Attention: mid = input + attnOut·W_oᵀ
      matmul(e, { a: ws.dResidual, b: this.param(`${p}.self_attn.o_proj.weight`), out: ws.dAttnOut, M: R, N: NHS, K: C, layout: 'nn' });
      matmul(e, { a: ws.dResidual, b: a.attnOut, out: g(`${p}.self_attn.o_proj.weight`), M: C, N: NHS, K: R, layout: 'tn', accumulate: true });
      if (c.outputBias) {
        matmul(e, { a: ws.dResidual, b: ws.ones, out: g(`${p}.self_attn.o_proj.bias`), M: C, N: 1, K: R, layout: 'tn', accumulate: true });
      }
      attentionBackward(e, {
        ...dims, q: a.qkv, k: a.qkv, v: a.qkv, keyMask: batch.keyMask, out: a.attnOut, lse: a.lse, dOut: ws.dAttnOut,
        dq: ws.dQkv, dk: ws.dQkv, dv: ws.dQkv,
      });
      ropeBackward(e, { dQkv: ws.dQkv, positions: batch.positions, rows: R, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim, theta: c.ropeTheta });
      let dProjection = ws.dQkv;
      if (c.qkNorm) {
        headRmsnormBackward(e, {
          qkv: a.qkvRaw, qWeight: this.param(`${p}.self_attn.q_norm.weight`), kWeight: this.param(`${p}.self_attn.k_norm.weight`),
          rstd: a.qkvRstd, dOut: ws.dQkv, dQkv: ws.dQkvRaw, dQWeight: g(`${p}.self_attn.q_norm.weight`), dKWeight: g(`${p}.self_attn.k_norm.weight`),
          rows: R, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim,
        });
        dProjection = ws.dQkvRaw;
      }
      if (c.attentionBias) {
        matmul(e, { a: dProjection, b: ws.ones, out: g(`${p}.self_attn.qkv_proj.bias`), M: W, N: 1, K: R, layout: 'tn', accumulate: true });
      }
      matmul(e, { a: dProjection, b: this.param(`${p}.self_attn.qkv_proj.weight`), out: ws.dNormed, M: R, N: C, K: W, layout: 'nn' });
      matmul(e, { a: dProjection, b: a.attnNormed, out: g(`${p}.self_attn.qkv_proj.weight`), M: W, N: C, K: R, layout: 'tn', accumulate: true });
      rmsnormBackward(e, {
        x: a.input, weight: this.param(`${p}.input_layernorm.weight`), rstd: a.attnRstd, dOut: ws.dNormed, dx: ws.dResidual,
        dWeight: g(`${p}.input_layernorm.weight`), rows: R, cols: C, accumulateDx: true, accumulateDWeight: true,
      });
    }
    const index = uploadTokenIndex(e, batch);
    embeddingBackward(e, {
      tokenOffsets: index.offsets, tokenPositions: index.positions, dOut: ws.dResidual, dTable: g('model.embed_tokens.weight'),
      N: R, V: c.vocabSize, C, accumulate: true,
    });
    e.flush();
    e.destroyTensor(index.offsets);
    e.destroyTensor(index.positions);
  }
}
