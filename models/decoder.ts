// The decoder trunk of Llama / Qwen2 / Qwen3 as a schedule of kernels: embedding → L × (RMSNorm → fused qkv
// projection [+ bias] → [per-head q/k RMSNorm] → RoPE → causal GQA attention → o_proj + residual → RMSNorm →
// fused gate/up → SwiGLU → down_proj + residual) → final RMSNorm. The forward records what the backward needs
// (every activation, or with gradient checkpointing each layer's input, the rest recomputed in backward); the
// backward walks the same schedule in reverse and accumulates parameter gradients into a gradient arena.
// Heads (LM head, value head, reward score) sit on top of the final hidden state and live in their own files.
import type { Engine, Tensor, Arena, FloatDType } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { layerPrefix, qkvWidth } from './parameter-layout.ts';
import type { TokenBatch } from './token-batch.ts';
import { GrowingBuffers } from './growing-buffers.ts';
import { uploadTokenIndex } from './token-batch.ts';
import { matmul } from '../kernels/matmul/matmul.ts';
import { embeddingForward, embeddingBackward } from '../kernels/layers/embedding.ts';
import { rmsnormForward, rmsnormBackward } from '../kernels/layers/rmsnorm.ts';
import { headRmsnormForward, headRmsnormBackward } from '../kernels/layers/head-rmsnorm.ts';
import { ropeForward, ropeBackward } from '../kernels/layers/rope.ts';
import { attentionForward, attentionBackward, type AttentionDims } from '../kernels/attention/attention.ts';
import { swigluForward, swigluBackward } from '../kernels/layers/swiglu.ts';
import { transposedWeightVariants } from '../kernels/util/transpose.ts';
import { TransposedWeights } from './transposed-weights.ts';
import { chooseVariant } from '../engine/index.ts';
import type { LoraAdapters } from './lora-adapters.ts';
import type { ProjectionKind } from './lora.ts';
import { layerWeightsAreF32, weightOperand } from './weight-operand.ts';
import { HalfParameterCopy } from './half-parameter-copy.ts';
import { toHalf } from '../kernels/util/to-half.ts';
import { fromHalf } from '../kernels/util/from-half.ts';
import { chunkRows, rowChunks, rowWindow, type RowChunk } from './row-chunks.ts';
import {
  AttentionWindows,
  attentionWindowRows,
  keyWindowRows,
  type AttentionWindowState,
} from './attention-windows.ts';

/** Per-layer activations kept for the backward pass: shapes use R = B·T rows. */
interface LayerActivations {
  input: Tensor; //        (R, C) residual stream entering the layer
  attnNormed: Tensor; //   (R, C)
  attnRstd: Tensor; //     (R)
  qkvRaw: Tensor; //       (R, W) projection output before q/k norm (Qwen3 only; otherwise same as qkv)
  qkvRstd: Tensor; //      (R, NH+NKV) Qwen3 only
  qkv: Tensor; //          (R, W) q, k after norm and RoPE; v
  attnOut: Tensor; //      (R, NH·HS)
  lse: Tensor; //          (B, NH, T); with attention windows (B, windows, NH, S) (models/attention-windows.ts)
  mid: Tensor; //          (R, C) residual after attention
  mlpNormed: Tensor; //    (R, C)
  mlpRstd: Tensor; //      (R)
  gateUp: Tensor; //       (R, 2I)
  act: Tensor; //          (R, I)
  /** LoRA: each adapted projection's low-rank activation x·Aᵀ (R, n·r). */
  lora: Partial<Record<ProjectionKind, Tensor>>;
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
  // LoRA backward scratch: the low-rank activations' gradient, and the frozen norms' unused weight gradients
  dLora: Tensor; //        (R, max n·r)
  frozenNormGrads: { hidden: Tensor; q: Tensor; k: Tensor }; // (C), (HS), (HS)
  /** Attention over windows of each sequence's rows where its tensors over the micro-batch are above one binding. */
  attention: AttentionWindowState | null;
  /** Mixed precision: the residual stream rounded to the compute dtype between layers (roundResidual). */
  half: {
    scratch: Tensor; //    (R, C) in the compute dtype
    /** With gradient checkpointing: each layer's input as kept for the backward, in the compute dtype (every layer
     *  shares one float32 input buffer), and the float32 (R, C) output each layer writes before it is rounded. */
    checkpoints: { inputs: Tensor[]; next: Tensor } | null;
  } | null;
}

export interface DecoderForwardOptions {
  /** Keep what backward() needs: every layer's activations, or with gradient checkpointing only its input. */
  saveForBackward: boolean;
}

/**
 * What a forward keeps: `infer` alternates two layers' buffers; `train` keeps every layer's activations;
 * `checkpointed` keeps each layer's input and one layer's activations, recomputed layer by layer in backward.
 */
type WorkspaceMode = 'infer' | 'train' | 'checkpointed';
/** A projection's LoRA adapter backward over a window's rows (no-op without adapters). */
type AdapterBackward = (kind: ProjectionKind, x: Tensor, u: Tensor | undefined, dOut: Tensor, dX: Tensor) => void;

/** The layer weights a forward multiplies by (layerForward's projections), by name within a layer. */
export const LINEAR_WEIGHTS = [
  'self_attn.qkv_proj.weight',
  'self_attn.o_proj.weight',
  'mlp.gate_up_proj.weight',
  'mlp.down_proj.weight',
];

export class DecoderTrunk {
  /** Activation recomputation (verl's enable_gradient_checkpointing): a training forward keeps only each
   *  layer's input, and backward recomputes the layer from it — the same kernels in the same order, so the
   *  same gradients, for about one more forward of compute. */
  gradientCheckpointing = false;
  /** LoRA adapters on the projections: then only they train (backward's `grads` is their arena's layout) and
   *  every base weight is frozen; null: every parameter trains. */
  lora: LoraAdapters | null = null;
  private readonly buffers: GrowingBuffers;
  private lastForward: { batch: TokenBatch; workspace: Workspace; mode: WorkspaceMode; transposed: boolean } | null =
    null;
  /** The layer weights' transposed copies that training forwards multiply by on CPU devices. */
  private readonly transposed: TransposedWeights;
  /** Mixed precision (fsdp_config.dtype): the half-precision copy of the float32 master weights that forwards and
   *  backward multiply by; null: they read the master weights. */
  private compute: HalfParameterCopy | null = null;
  private readonly attentionWindows: AttentionWindows;
  /** Windowed attention's gather indices, by window rows (uploaded once). */
  private readonly keyIndex = new Map<number, { keys: Tensor<'u32'>; values: Tensor<'u32'> }>();

  constructor(
    readonly engine: Engine,
    readonly config: DecoderConfig,
    readonly params: Arena,
  ) {
    this.buffers = new GrowingBuffers(engine, 'trunk');
    this.transposed = TransposedWeights.acquire(engine, params);
    this.attentionWindows = new AttentionWindows(engine, config);
  }

  /** Mixed-precision training (verl's fsdp_config.dtype, FSDP's MixedPrecision param_dtype): with bf16/f16 the
   *  forward and the backward's data products multiply by a half-precision copy of the float32 master weights,
   *  remade from them before the first forward after each write (an optimizer step); weight gradients still land in
   *  the float32 gradient arena and the optimizer updates the master. For a model whose weights all train: a LoRA
   *  base is frozen and already computes in its stored dtype. */
  setComputeDtype(dtype: FloatDType): void {
    this.compute?.destroy();
    this.compute = null;
    if (dtype === 'f32') return;
    if (this.lora || !layerWeightsAreF32(this.params))
      throw new Error(
        `${this.params.label}: a ${dtype} compute copy needs float32 master weights that all train (no LoRA adapters)`,
      );
    this.compute = new HalfParameterCopy(this.engine, this.config, this.params, `${this.params.label}.compute`, dtype);
  }

  /** The mixed-precision compute copy, if any (the rollout decodes from it when it asks for the same dtype). */
  get computeCopy(): HalfParameterCopy | null {
    return this.compute;
  }

  /** The weights forwards and backward read: the mixed-precision compute copy, or the parameters themselves. Current
   *  from the start of each forward on. */
  get weights(): Arena {
    return this.compute?.params ?? this.params;
  }

  private param(name: string): Tensor {
    return this.weights.get(name);
  }

  /** The layer weights a forward multiplies by. */
  private linearWeightNames(): string[] {
    return Array.from({ length: this.config.numLayers }, (_, l) =>
      LINEAR_WEIGHTS.map((n) => `${layerPrefix(l)}.${n}`),
    ).flat();
  }

  /** out (+)= a·Wᵀ (+ bias) for the layer weight `name` (N, K): nt against W, or with `transposed` nn against Wᵀ. */
  private linear(
    name: string,
    transposed: boolean,
    args: { a: Tensor; out: Tensor; M: number; N: number; K: number; accumulate?: boolean; bias?: Tensor },
  ): void {
    if (transposed) matmul(this.engine, { ...args, b: this.transposed.copy(name), layout: 'nn' });
    else matmul(this.engine, { ...args, ...weightOperand(this.weights, name), layout: 'nt' });
  }

  /** Frees the forwards' and backwards' activation buffers (between steps, so the rollout can use the memory:
   *  actor_rollout_ref.rollout.free_cache_engine); the next forward allocates them again. */
  releaseWork(): void {
    this.buffers.destroy();
    for (const index of this.keyIndex.values()) {
      this.engine.destroyTensor(index.keys);
      this.engine.destroyTensor(index.values);
    }
    this.keyIndex.clear();
    this.lastForward = null;
  }

  /** Bytes of the activation buffers a forward in this mode has allocated (the largest call so far). */
  activationBytes(saveForBackward: boolean): number {
    return this.buffers.bytes(`${this.mode(saveForBackward)}.`);
  }

  private mode(saveForBackward: boolean): WorkspaceMode {
    if (!saveForBackward) return 'infer';
    return this.gradientCheckpointing ? 'checkpointed' : 'train';
  }

  private workspace(B: number, T: number, mode: WorkspaceMode): Workspace {
    const c = this.config;
    const R = B * T;
    const W = qkvWidth(c);
    const C = c.hiddenSize;
    const I = c.intermediateSize;
    const t = (name: string, shape: number[], fill?: number) => this.buffers.get(`${mode}.${name}`, shape, 'f32', fill);
    const lora = this.lora;
    const computeDtype = this.compute?.dtype ?? null;
    const S = attentionWindowRows(
      c,
      B,
      T,
      this.engine.maxBindingBytes,
      this.engine.caps.minStorageBufferOffsetAlignment,
    );
    const lseShape = S ? [B * Math.ceil(T / S) * c.numHeads * S] : [B, c.numHeads, T];
    const layer = (tag: string, l: number, input?: Tensor): LayerActivations => {
      const n = (what: string) => `${tag}.${what}`;
      const qkv = t(n('qkv'), [R, W]);
      const loraHidden: Partial<Record<ProjectionKind, Tensor>> = {};
      for (const kind of ['qkv', 'o', 'gateUp', 'down'] as const) {
        const rank = lora?.rankOf(l, kind) ?? 0;
        if (rank > 0) loraHidden[kind] = t(n(`lora.${kind}`), [R, rank]);
      }
      return {
        input: input ?? t(n('input'), [R, C]),
        attnNormed: t(n('attnNormed'), [R, C]),
        attnRstd: t(n('attnRstd'), [R]),
        qkvRaw: c.qkNorm ? t(n('qkvRaw'), [R, W]) : qkv,
        qkvRstd: t(n('qkvRstd'), [c.qkNorm ? R * (c.numHeads + c.numKvHeads) : 1]),
        qkv,
        attnOut: t(n('attnOut'), [R, c.numHeads * c.headDim]),
        lse: t(n('lse'), lseShape),
        mid: t(n('mid'), [R, C]),
        mlpNormed: t(n('mlpNormed'), [R, C]),
        mlpRstd: t(n('mlpRstd'), [R]),
        gateUp: t(n('gateUp'), [R, 2 * I]),
        act: t(n('act'), [R, I]),
        lora: loraHidden,
      };
    };
    const layers: LayerActivations[] = [];
    if (mode === 'train') {
      for (let l = 0; l < c.numLayers; l++) layers.push(layer(`layer${l}`, l));
    } else if (mode === 'checkpointed') {
      // Shared sets serve every layer: all layers adapt the same modules (models/lora.ts). Under mixed precision the
      // layers' inputs are kept in half precision and unpacked into one shared float32 input.
      const shared = layer('shared', 0, t('layer0.input', [R, C]));
      for (let l = 0; l < c.numLayers; l++)
        layers.push({ ...shared, input: computeDtype ? shared.input : t(`layer${l}.input`, [R, C]) });
    } else {
      // Inference: layer l's input is layer l−1's output; two sets of buffers alternate.
      const a = layer('a', 0);
      const b = layer('b', 0);
      for (let l = 0; l < c.numLayers; l++) layers.push(l % 2 === 0 ? a : b);
    }
    const saved = mode !== 'infer';
    const kv = c.numKvHeads * c.headDim;
    // Each sequence's key mask starts aligned, so a window's view of it (at a multiple of S rows) binds.
    const maskAlign = this.engine.caps.minStorageBufferOffsetAlignment / 4;
    const Tp = Math.ceil(T / maskAlign) * maskAlign;
    const keyRows =
      S && keyWindowRows(c, T, S, this.engine.maxBindingBytes, this.engine.caps.minStorageBufferOffsetAlignment);
    return {
      attention: S
        ? {
            S,
            keyRows,
            partial: keyRows
              ? {
                  out: t('attention.partial.out', [S, c.numHeads * c.headDim]),
                  lse: t('attention.partial.lse', [c.numHeads, S]),
                }
              : null,
            keys: t('attention.keys', [R, kv]),
            values: t('attention.values', [R, kv]),
            mask: this.buffers.get(`${mode}.attention.mask`, [B * Tp], 'u32'),
            Tp,
            index: (rows) => this.gatherIndex(rows),
          }
        : null,
      B,
      T,
      layers,
      output: t('output', [R, C]),
      finalNormed: t('finalNormed', [R, C]),
      finalRstd: t('finalRstd', [R]),
      dResidual: saved ? t('dResidual', [R, C]) : undefined!,
      dNormed: saved ? t('dNormed', [R, C]) : undefined!,
      dAct: saved ? t('dAct', [R, I]) : undefined!,
      dGateUp: saved ? t('dGateUp', [R, 2 * I]) : undefined!,
      dAttnOut: saved ? t('dAttnOut', [R, c.numHeads * c.headDim]) : undefined!,
      dQkv: saved ? t('dQkv', [R, W]) : undefined!,
      dQkvRaw: saved && c.qkNorm ? t('dQkvRaw', [R, W]) : undefined!,
      ones: saved && (c.attentionBias || c.outputBias) ? t('ones', [R], 1) : undefined!,
      dLora: saved && lora ? t('dLora', [R, lora.maxRank]) : undefined!,
      frozenNormGrads:
        saved && lora
          ? { hidden: t('frozen.dNorm', [C]), q: t('frozen.dQNorm', [c.headDim]), k: t('frozen.dKNorm', [c.headDim]) }
          : undefined!,
      half: computeDtype && {
        scratch: this.buffers.get(`${mode}.roundScratch`, [R, C], computeDtype),
        checkpoints:
          mode === 'checkpointed'
            ? {
                inputs: Array.from({ length: c.numLayers }, (_, l) =>
                  this.buffers.get(`${mode}.layer${l}.input.${computeDtype}`, [R, C], computeDtype),
                ),
                next: t('next', [R, C]),
              }
            : null,
      },
    };
  }

  /** Rows of the fused q/k/v, as rows of HS, that hold a window of `rows` tokens' keys and values. */
  private gatherIndex(rows: number): { keys: Tensor<'u32'>; values: Tensor<'u32'> } {
    let index = this.keyIndex.get(rows);
    if (!index) {
      const c = this.config;
      const heads = c.numHeads + 2 * c.numKvHeads;
      const at = (first: number) =>
        Uint32Array.from({ length: rows * c.numKvHeads }, (_, i) => {
          const r = Math.floor(i / c.numKvHeads);
          return r * heads + first + (i - r * c.numKvHeads);
        });
      index = {
        keys: this.engine.tensorFrom('trunk.attention.keyIndex', [rows * c.numKvHeads], at(c.numHeads), 'u32'),
        values: this.engine.tensorFrom(
          'trunk.attention.valueIndex',
          [rows * c.numKvHeads],
          at(c.numHeads + c.numKvHeads),
          'u32',
        ),
      };
      this.keyIndex.set(rows, index);
    }
    return index;
  }

  private attentionDims(B: number, T: number): AttentionDims {
    const c = this.config;
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

  /**
   * Records layer l's forward from a.input into a's activations; with `next`, also its output (the residual
   * after the MLP) into `next`. Backward's recomputation passes no `next`: it needs the activations only.
   */
  private layerForward(
    l: number,
    a: LayerActivations,
    next: Tensor | null,
    batch: TokenBatch,
    dims: AttentionDims,
    windows: AttentionWindowState | null,
    transposed: boolean,
  ): void {
    const c = this.config;
    const e = this.engine;
    const R = batch.B * batch.T;
    const C = c.hiddenSize;
    const W = qkvWidth(c);
    const I = c.intermediateSize;
    const p = layerPrefix(l);
    const NHS = c.numHeads * c.headDim;
    const rank = (kind: ProjectionKind) => this.lora?.rankOf(l, kind) ?? 0;
    // Every op but attention over windows of rows when a tensor it binds by rows is above one binding
    // (models/row-chunks.ts), the MLP over its own; else one window, all R rows: the unchunked schedule.
    const chunks = this.rowChunks(R);
    for (const chunk of chunks) {
      const rows = chunkRows(chunk, R);
      const n = chunk.rows;
      const normed = rows(a.attnNormed, C);
      const qkvRaw = rows(a.qkvRaw, W);
      const qkv = rows(a.qkv, W);
      rmsnormForward(e, {
        x: rows(a.input, C),
        weight: this.param(`${p}.input_layernorm.weight`),
        out: normed,
        rstd: rows(a.attnRstd, 1),
        rows: n,
        cols: C,
        eps: c.rmsNormEps,
      });
      this.linear(`${p}.self_attn.qkv_proj.weight`, transposed, {
        a: normed,
        out: qkvRaw,
        M: n,
        N: W,
        K: C,
        bias: c.attentionBias ? this.param(`${p}.self_attn.qkv_proj.bias`) : undefined,
      });
      this.lora?.forward(l, 'qkv', { a: normed }, rows(a.lora.qkv, rank('qkv'))!, qkvRaw, n);
      if (c.qkNorm) {
        headRmsnormForward(e, {
          qkv: qkvRaw,
          qWeight: this.param(`${p}.self_attn.q_norm.weight`),
          kWeight: this.param(`${p}.self_attn.k_norm.weight`),
          out: qkv,
          rstd: rows(a.qkvRstd, c.numHeads + c.numKvHeads),
          rows: n,
          NH: c.numHeads,
          NKV: c.numKvHeads,
          HS: c.headDim,
          eps: c.rmsNormEps,
        });
      }
      ropeForward(e, {
        qkv,
        positions: rows(batch.positions, 1),
        rows: n,
        NH: c.numHeads,
        NKV: c.numKvHeads,
        HS: c.headDim,
        theta: c.ropeTheta,
      });
    }
    // Attention binds the micro-batch's q, k, v, output and log-sum-exp whole, or runs over windows of each
    // sequence's rows where they are above one binding (models/attention-windows.ts).
    if (windows) {
      this.attentionWindows.gatherKeys(windows, a.qkv, chunks, R);
      this.attentionWindows.forward(windows, { qkv: a.qkv, out: a.attnOut, lse: a.lse }, batch.B, batch.T);
    } else
      attentionForward(e, {
        ...dims,
        q: a.qkv,
        k: a.qkv,
        v: a.qkv,
        keyMask: batch.keyMask,
        out: a.attnOut,
        lse: a.lse,
      });
    for (const chunk of chunks) {
      const rows = chunkRows(chunk, R);
      const n = chunk.rows;
      const mid = rows(a.mid, C);
      const attnOut = rows(a.attnOut, NHS);
      e.copy(rows(a.input, C), mid);
      this.linear(`${p}.self_attn.o_proj.weight`, transposed, {
        a: attnOut,
        out: mid,
        M: n,
        N: C,
        K: NHS,
        accumulate: true,
        bias: c.outputBias ? this.param(`${p}.self_attn.o_proj.bias`) : undefined,
      });
      this.lora?.forward(l, 'o', { a: attnOut }, rows(a.lora.o, rank('o'))!, mid, n);
      rmsnormForward(e, {
        x: mid,
        weight: this.param(`${p}.post_attention_layernorm.weight`),
        out: rows(a.mlpNormed, C),
        rstd: rows(a.mlpRstd, 1),
        rows: n,
        cols: C,
        eps: c.rmsNormEps,
      });
    }
    // The MLP over its own windows: its (R, 2I) outgrows a binding first, and it binds no one-word rows.
    for (const chunk of this.mlpChunks(l, R)) {
      const rows = chunkRows(chunk, R);
      const n = chunk.rows;
      const normed = rows(a.mlpNormed, C);
      const gateUp = rows(a.gateUp, 2 * I);
      const act = rows(a.act, I);
      const loraDown = rows(a.lora.down, rank('down'));
      this.linear(`${p}.mlp.gate_up_proj.weight`, transposed, { a: normed, out: gateUp, M: n, N: 2 * I, K: C });
      this.lora?.forward(l, 'gateUp', { a: normed }, rows(a.lora.gateUp, rank('gateUp'))!, gateUp, n);
      swigluForward(e, { gateUp, out: act, rows: n, I });
      if (!next) {
        this.lora?.forward(l, 'down', { a: act }, loraDown!, null, n);
        continue;
      }
      const out = rows(next, C);
      e.copy(rows(a.mid, C), out);
      this.linear(`${p}.mlp.down_proj.weight`, transposed, { a: act, out, M: n, N: C, K: I, accumulate: true });
      this.lora?.forward(l, 'down', { a: act }, loraDown!, out, n);
    }
  }

  /** The row windows the trunk's row-wise ops outside the MLP run over (models/row-chunks.ts), and the heads on it:
   *  every tensor they bind by rows, forward and backward — the residual stream, qkv, attention's output, LoRA's
   *  low-rank activations and their gradient's scratch, and the one-word rows of the norms' rstd, the token ids and
   *  positions, the heads' per-token outputs (whose windows therefore start on multiples of 64 rows). */
  rowChunks(R: number): RowChunk[] {
    const c = this.config;
    const lora = this.lora;
    const ranks = lora
      ? Array.from({ length: c.numLayers }, (_, l) => [lora.rankOf(l, 'qkv'), lora.rankOf(l, 'o')]).flat()
      : [];
    return rowChunks(
      R,
      [
        c.hiddenSize,
        qkvWidth(c),
        c.numHeads * c.headDim,
        1,
        ...(c.qkNorm ? [c.numHeads + c.numKvHeads] : []),
        ...new Set([...ranks, lora?.maxRank ?? 0].filter((r) => r > 0)),
      ],
      this.engine.maxBindingBytes,
      this.engine.caps.minStorageBufferOffsetAlignment,
    );
  }

  /** The row windows layer l's MLP runs over (models/row-chunks.ts): every tensor it binds by rows, forward and
   *  backward, LoRA's low-rank activations and their gradient's scratch included. */
  private mlpChunks(l: number, R: number): RowChunk[] {
    const c = this.config;
    const ranks = this.lora ? [this.lora.rankOf(l, 'gateUp'), this.lora.rankOf(l, 'down'), this.lora.maxRank] : [];
    return rowChunks(
      R,
      [c.hiddenSize, 2 * c.intermediateSize, c.intermediateSize, ...ranks.filter((r) => r > 0)],
      this.engine.maxBindingBytes,
      this.engine.caps.minStorageBufferOffsetAlignment,
    );
  }

  /**
   * Mixed precision: the residual stream `x` entering layer l (l = L: the final norm) rounded to the compute dtype,
   * as a bf16 model's hidden states are between its layers — in every mode alike, so a log-prob forward, a training
   * forward and the backward's recomputation see the same values. With gradient checkpointing the rounded input is
   * what the backward keeps (half the bytes of float32), unpacked into the layers' shared float32 input. The
   * backward passes the residual gradient through the rounding unchanged, as autograd does through a cast.
   */
  private roundResidual(ws: Workspace, l: number, x: Tensor): void {
    if (!ws.half) return;
    const kept = l < ws.layers.length ? ws.half.checkpoints?.inputs[l] : undefined;
    const halves = kept ?? ws.half.scratch;
    toHalf(this.engine, { values: x, halves });
    fromHalf(this.engine, { halves, values: kept ? ws.layers[l].input : x });
  }

  /** Runs the trunk; returns the final normed hidden state (R, C), valid until the next forward. */
  forward(batch: TokenBatch, options: DecoderForwardOptions): Tensor {
    const c = this.config;
    const e = this.engine;
    const { B, T } = batch;
    const R = B * T;
    const C = c.hiddenSize;
    const mode = this.mode(options.saveForBackward);
    const ws = this.workspace(B, T, mode);
    const dims = this.attentionDims(B, T);
    this.compute?.refresh();
    // Windowed attention reads each sequence's key mask from an aligned start (views of the padded copy).
    if (ws.attention)
      for (let b = 0; b < B; b++)
        e.copy(
          batch.keyMask.view(`${batch.keyMask.name}[${b}]`, b * T, [T]),
          ws.attention.mask.view(`${ws.attention.mask.name}[${b}]`, b * ws.attention.Tp, [T]),
        );
    // The copies are float32 (kernels/util/transpose.ts): a half-precision LoRA base or compute copy is multiplied as
    // stored.
    const transposed =
      options.saveForBackward &&
      layerWeightsAreF32(this.weights) &&
      chooseVariant('transposed-weights', transposedWeightVariants, e.caps, e.knobs).value &&
      this.transposed.bindsWhole(this.linearWeightNames());
    if (transposed) this.transposed.refresh(this.linearWeightNames());

    const chunks = this.rowChunks(R);
    for (const chunk of chunks)
      embeddingForward(e, {
        ids: rowWindow(batch.ids, 1, chunk, R),
        table: this.param('model.embed_tokens.weight'),
        out: rowWindow(ws.layers[0].input, C, chunk, R),
        N: chunk.rows,
        V: c.vocabSize,
        C,
      });
    this.roundResidual(ws, 0, ws.layers[0].input);
    for (let l = 0; l < c.numLayers; l++) {
      const last = l + 1 === c.numLayers;
      const next = last ? ws.output : (ws.half?.checkpoints?.next ?? ws.layers[l + 1].input);
      this.layerForward(l, ws.layers[l], next, batch, dims, ws.attention, transposed);
      this.roundResidual(ws, l + 1, next);
    }
    for (const chunk of chunks)
      rmsnormForward(e, {
        x: rowWindow(ws.output, C, chunk, R),
        weight: this.param('model.norm.weight'),
        out: rowWindow(ws.finalNormed, C, chunk, R),
        rstd: rowWindow(ws.finalRstd, 1, chunk, R),
        rows: chunk.rows,
        cols: C,
        eps: c.rmsNormEps,
      });
    this.lastForward = { batch, workspace: ws, mode, transposed };
    return ws.finalNormed;
  }

  /**
   * Backward of the last forward (which must have saved activations) given dFinal = ∂loss/∂(final hidden) (R, C).
   * Parameter gradients are ADDED into `grads` (same layout as the parameters, or as the LoRA adapters' when the
   * trunk has them), so micro-batches accumulate.
   * `dFinal` may be overwritten.
   */
  backward(dFinal: Tensor, grads: Arena): void {
    if (!this.lastForward || this.lastForward.mode === 'infer')
      throw new Error('DecoderTrunk.backward: the last forward did not save activations (saveForBackward)');
    const { batch, workspace: ws, mode, transposed } = this.lastForward;
    const c = this.config;
    const e = this.engine;
    const { B, T } = batch;
    const R = B * T;
    const C = c.hiddenSize;
    const W = qkvWidth(c);
    const I = c.intermediateSize;
    const NHS = c.numHeads * c.headDim;
    const dims = this.attentionDims(B, T);
    const lora = this.lora;
    // With LoRA every base weight is frozen: its weight-gradient matmuls are skipped, and the norms' weight
    // gradients (computed in the same dispatch as dx) land in scratch.
    const g = (name: string) => grads.get(name);
    const frozen = ws.frozenNormGrads;
    const chunks = this.rowChunks(R);
    /** A row-wise piece of the backward over `windows`: `body` gets a window's rows of any (R, width) tensor and
     *  its LoRA adapters' backward over those rows (the low-rank gradient's scratch a view of its first rows). */
    const overChunks = (
      windows: RowChunk[],
      l: number,
      body: (
        rows: <T extends Tensor | undefined>(t: T, width: number) => T,
        n: number,
        adapter: AdapterBackward,
      ) => void,
    ) => {
      for (const chunk of windows) {
        const rows = chunkRows(chunk, R);
        const n = chunk.rows;
        const du = lora && n < R ? ws.dLora.view(`${ws.dLora.name}[:${n}]`, 0, [n, lora.maxRank]) : ws.dLora;
        body(rows, n, (kind, x, u, dOut, dX) =>
          lora?.backward(l, kind, { x, u: rows(u, lora.rankOf(l, kind))!, dOut, dX, du, grads, M: n }),
        );
      }
    };
    /** A projection's backward over a window of n rows of x (n, inputs) and dY (n, outputs): dX = dY·W, then the
     *  weight's gradient (and with `ones`, its bias's) where the weight trains, then its adapter's part. */
    const projectionBackward = (
      adapter: AdapterBackward,
      kind: ProjectionKind,
      weight: string,
      t: { x: Tensor; u?: Tensor; dY: Tensor; dX: Tensor; n: number; inputs: number; outputs: number; ones?: Tensor },
    ) => {
      const { x, dY, dX, n, inputs, outputs, ones } = t;
      matmul(e, { a: dY, ...weightOperand(this.weights, weight), out: dX, M: n, N: inputs, K: outputs, layout: 'nn' });
      if (!lora) {
        matmul(e, { a: dY, b: x, out: g(weight), M: outputs, N: inputs, K: n, layout: 'tn', accumulate: true });
        if (ones) {
          const bias = weight.replace(/\.weight$/, '.bias');
          matmul(e, { a: dY, b: ones, out: g(bias), M: outputs, N: 1, K: n, layout: 'tn', accumulate: true });
        }
      }
      adapter(kind, x, t.u, dY, dX);
    };

    for (const chunk of chunks)
      rmsnormBackward(e, {
        x: rowWindow(ws.output, C, chunk, R),
        weight: this.param('model.norm.weight'),
        rstd: rowWindow(ws.finalRstd, 1, chunk, R),
        dOut: rowWindow(dFinal, C, chunk, R),
        dx: rowWindow(ws.dResidual, C, chunk, R),
        dWeight: lora ? frozen.hidden : g('model.norm.weight'),
        rows: chunk.rows,
        cols: C,
        accumulateDx: false,
        accumulateDWeight: true,
      });
    for (let l = c.numLayers - 1; l >= 0; l--) {
      const p = layerPrefix(l);
      const a = ws.layers[l];
      if (mode === 'checkpointed') {
        const kept = ws.half?.checkpoints?.inputs[l];
        if (kept) fromHalf(e, { halves: kept, values: a.input });
        this.layerForward(l, a, null, batch, dims, ws.attention, transposed);
      }
      // MLP: next = mid + act·W_downᵀ, then mid = input + attnOut·W_oᵀ, each over the forward's row windows; the
      // weight gradients sum window by window.
      overChunks(this.mlpChunks(l, R), l, (rows, n, adapter) => {
        const dResidual = rows(ws.dResidual, C);
        const dAct = rows(ws.dAct, I);
        const dGateUp = rows(ws.dGateUp, 2 * I);
        const dNormed = rows(ws.dNormed, C);
        const act = rows(a.act, I);
        const normed = rows(a.mlpNormed, C);
        projectionBackward(adapter, 'down', `${p}.mlp.down_proj.weight`, {
          x: act,
          u: a.lora.down,
          dY: dResidual,
          dX: dAct,
          n,
          inputs: I,
          outputs: C,
        });
        swigluBackward(e, { gateUp: rows(a.gateUp, 2 * I), dOut: dAct, dGateUp, rows: n, I });
        projectionBackward(adapter, 'gateUp', `${p}.mlp.gate_up_proj.weight`, {
          x: normed,
          u: a.lora.gateUp,
          dY: dGateUp,
          dX: dNormed,
          n,
          inputs: C,
          outputs: 2 * I,
        });
      });
      overChunks(chunks, l, (rows, n, adapter) => {
        const dResidual = rows(ws.dResidual, C);
        const dNormed = rows(ws.dNormed, C);
        const dAttnOut = rows(ws.dAttnOut, NHS);
        const attnOut = rows(a.attnOut, NHS);
        rmsnormBackward(e, {
          x: rows(a.mid, C),
          weight: this.param(`${p}.post_attention_layernorm.weight`),
          rstd: rows(a.mlpRstd, 1),
          dOut: dNormed,
          dx: dResidual,
          dWeight: lora ? frozen.hidden : g(`${p}.post_attention_layernorm.weight`),
          rows: n,
          cols: C,
          accumulateDx: true,
          accumulateDWeight: true,
        });
        projectionBackward(adapter, 'o', `${p}.self_attn.o_proj.weight`, {
          x: attnOut,
          u: a.lora.o,
          dY: dResidual,
          dX: dAttnOut,
          n,
          inputs: NHS,
          outputs: C,
          ones: c.outputBias ? rows(ws.ones, 1) : undefined,
        });
      });
      if (ws.attention) {
        this.attentionWindows.gatherKeys(ws.attention, a.qkv, chunks, R);
        const tensors = { qkv: a.qkv, out: a.attnOut, lse: a.lse };
        this.attentionWindows.backward(ws.attention, tensors, ws.dAttnOut, ws.dQkv, B, T);
      } else
        attentionBackward(e, {
          ...dims,
          q: a.qkv,
          k: a.qkv,
          v: a.qkv,
          keyMask: batch.keyMask,
          out: a.attnOut,
          lse: a.lse,
          dOut: ws.dAttnOut,
          dq: ws.dQkv,
          dk: ws.dQkv,
          dv: ws.dQkv,
        });
      overChunks(chunks, l, (rows, n, adapter) => {
        const dQkv = rows(ws.dQkv, W);
        const normed = rows(a.attnNormed, C);
        const dNormed = rows(ws.dNormed, C);
        ropeBackward(e, {
          dQkv,
          positions: rows(batch.positions, 1),
          rows: n,
          NH: c.numHeads,
          NKV: c.numKvHeads,
          HS: c.headDim,
          theta: c.ropeTheta,
        });
        let dProjection = dQkv;
        if (c.qkNorm) {
          dProjection = rows(ws.dQkvRaw, W);
          headRmsnormBackward(e, {
            qkv: rows(a.qkvRaw, W),
            qWeight: this.param(`${p}.self_attn.q_norm.weight`),
            kWeight: this.param(`${p}.self_attn.k_norm.weight`),
            rstd: rows(a.qkvRstd, c.numHeads + c.numKvHeads),
            dOut: dQkv,
            dQkv: dProjection,
            dQWeight: lora ? frozen.q : g(`${p}.self_attn.q_norm.weight`),
            dKWeight: lora ? frozen.k : g(`${p}.self_attn.k_norm.weight`),
            rows: n,
            NH: c.numHeads,
            NKV: c.numKvHeads,
            HS: c.headDim,
          });
        }
        projectionBackward(adapter, 'qkv', `${p}.self_attn.qkv_proj.weight`, {
          x: normed,
          u: a.lora.qkv,
          dY: dProjection,
          dX: dNormed,
          n,
          inputs: C,
          outputs: W,
          ones: c.attentionBias ? rows(ws.ones, 1) : undefined,
        });
        rmsnormBackward(e, {
          x: rows(a.input, C),
          weight: this.param(`${p}.input_layernorm.weight`),
          rstd: rows(a.attnRstd, 1),
          dOut: dNormed,
          dx: rows(ws.dResidual, C),
          dWeight: lora ? frozen.hidden : g(`${p}.input_layernorm.weight`),
          rows: n,
          cols: C,
          accumulateDx: true,
          accumulateDWeight: true,
        });
      });
    }
    if (lora) return;
    // The embedding's backward reads a token index of each window's rows (built on the host from its ids).
    const indexes = chunks.map((chunk) => {
      const index = uploadTokenIndex(e, batch.hostIds.subarray(chunk.first, chunk.first + chunk.rows), c.vocabSize);
      embeddingBackward(e, {
        tokenIds: index.ids,
        tokenPositions: index.positions,
        dOut: rowWindow(ws.dResidual, C, chunk, R),
        dTable: g('model.embed_tokens.weight'),
        N: chunk.rows,
        V: c.vocabSize,
        C,
        accumulate: true,
      });
      return index;
    });
    e.flush();
    for (const index of indexes) {
      e.destroyTensor(index.ids);
      e.destroyTensor(index.positions);
    }
  }
}
