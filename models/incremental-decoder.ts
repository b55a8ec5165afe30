// The decoder of models/decoder.ts run incrementally over a KV cache, for generation: each call takes T new
// tokens per sequence (T = prompt length for the prefill, 1 per decode step, the observation's length when a
// multi-turn rollout appends tool output), appends their keys and values to the cache, attends them against
// every cached slot, and returns the logits of each sequence's last new token.
// It uses the same kernels and the same parameter arena as DecoderTrunk, but not its schedule: inference keeps
// no activations, so the residual stream is one buffer that o_proj and down_proj accumulate into (no copies),
// and attention reads keys and values from the cache instead of the fused qkv buffer. The cache may be half
// precision (actor_rollout_ref.rollout.dtype, with the weights a half copy, ppo/generation/rollout-weights.ts):
// decode steps read it directly (kernels/decode/decode-attention), a multi-token call through a float32 copy of
// one layer's slots (kernels/decode/kv-cache-unpack) for the general attention kernels.
// The cache's rows come in decode groups that each fit one storage binding (models/kv-cache.ts): a decode step
// runs its projections over every row at once and attends group by group; a call of several tokens runs group by
// group, its activations sized for one group's rows, so no tensor of either outgrows a binding however many rows
// decode together. One group is the plain batch, with no dispatch added. A block of tokens whose activations outgrow a
// binding even for one row (a long prompt) goes in as several calls of fewer tokens, each extending the cache the
// calls before it wrote (chunked prefill, callTokens; only the last computes logits): rows are split into groups and
// tokens into calls, and a row whose cache layer is above a binding is a group of its own whose layers are bound in
// windows of slots (cacheWindowSlots: decode attention's windowSlots, attendInWindows), so only one row's logits is
// bound by a binding.
// On CPU devices decode steps multiply by transposed copies of the float32 layer weights (nn; remade when the
// weights were written since, models/transposed-weights.ts): a decode step's matmuls stream each weight once,
// and read along its rows that is one stream through memory instead of one per output column (the tiny model's
// 17 decode matmuls: 2.1-2.3 ms against 3.4-4.2 ms as stored, same run at load ~5).
import { Tensor, type Engine, type Arena, type FloatDType } from '../engine/index.ts';
import type { DecoderConfig } from './hf-config.ts';
import { layerPrefix, lmHeadWeightName, qkvWidth } from './parameter-layout.ts';
import { KvCache, type CacheGroup } from './kv-cache.ts';
import { GrowingBuffers } from './growing-buffers.ts';
import { matmul, useMatmulPrologue, type MatmulArgs } from '../kernels/matmul/matmul.ts';
import { embeddingForward } from '../kernels/layers/embedding.ts';
import { rmsnormForward } from '../kernels/layers/rmsnorm.ts';
import { headRmsnormForward } from '../kernels/layers/head-rmsnorm.ts';
import { ropeForward } from '../kernels/layers/rope.ts';
import { attentionForward, attentionMerge } from '../kernels/attention/attention.ts';
import {
  decodeAttention,
  decodeAttentionFusesRope,
  decodeAttentionSupports,
} from '../kernels/decode/decode-attention.ts';
import { decodeLayer, useDecodeLayer } from '../kernels/decode/decode-layer.ts';
import { kvCacheUnpack } from '../kernels/decode/kv-cache-unpack.ts';
import { swigluForward } from '../kernels/layers/swiglu.ts';
import { lmHeadLogits } from '../kernels/layers/lm-head.ts';
import { transposedWeightVariants } from '../kernels/util/transpose.ts';
import { LINEAR_WEIGHTS } from './decoder.ts';
import { TransposedWeights } from './transposed-weights.ts';
import { alignedRows, bytesPerElement, chooseVariant, elementCount, lcm } from '../engine/index.ts';
import type { LoraAdapters, ProjectionInput } from './lora-adapters.ts';
import { layerWeightsAreF32, weightOperand } from './weight-operand.ts';

/** Activations of one call; R = rows·T. */
interface StepBuffers {
  x: Tensor; //        (R, C) residual stream
  normed: Tensor; //   (R, C)
  rstd: Tensor; //     (R)
  qkvRaw: Tensor; //   (R, W) before Qwen3's q/k norm (the same tensor as qkv otherwise)
  qkvRstd: Tensor; //  (R·(NH+NKV)) Qwen3 only
  qkv: Tensor; //      (R, W)
  attnOut: Tensor; //  (R, NH·HS)
  lse: Tensor; //      (rows, NH, T)
  gateUp: Tensor; //   (R, 2I)
  act: Tensor; //      (R, I)
  loraHidden: Tensor; // (R, max n·r) LoRA: a projection's x·Aᵀ, consumed by its next matmul
}

/** The LM-head end of a call: each sequence's last hidden state (or every new token's) and its logits. */
interface HeadBuffers {
  last: Tensor; //       (H, C) residual at each sequence's last new token; H = rows, or rows·T for every position
  lastNormed: Tensor; // (H, C)
  lastRstd: Tensor; //   (H)
  logits: Tensor; //     (H, V)
}

export interface ExtendInput {
  /** (rows·T) token ids and position ids of the new tokens, row-major. */
  ids: Tensor<'u32'>;
  positions: Tensor<'i32'>;
  T: number;
  /** (rows·T) 1 = real token, 0 = padding; null: all real. The last token of a row that continues must be real. */
  mask: ArrayLike<number> | null;
  /** Logits of every new token, (rows·T, V), instead of each row's last (a server's prompt log-probs). */
  everyPosition?: boolean;
}

/** Which logits a call computes: each row's last new token's, every new token's, or none (a block's calls before
 *  its last, chunked prefill). */
type Head = 'last' | 'every' | 'none';

/** Rows of `rows` starting at row `first` of a call's activations, as a tensor a kernel can bind. */
interface RowSpan<D extends Tensor = Tensor> {
  tensor: D;
  /** Copies a scratch output back into place (nothing for a view). */
  done(): void;
}

/** A decode group's part of a call: its rows held, the first of them in the call's activations, its positions. */
interface GroupPart {
  group: CacheGroup;
  rows: number;
  at: number;
  positions: Tensor<'i32'> | null;
}

/** The widest activation row of a decoder call, in floats per token: the MLP's gate/up, qkv, the residual stream,
 *  attention's output or a LoRA low-rank activation. */
export function widestActivation(c: DecoderConfig, loraRank: number): number {
  return Math.max(2 * c.intermediateSize, qkvWidth(c), c.hiddenSize, c.numHeads * c.headDim, loraRank);
}

/**
 * Tokens a row of one call appends at most, for blocks of up to `tokens`: all of them, or as many as keep the widest
 * activation of one row within one binding of `bindingBytes` (at least 1). A longer block goes in as several calls,
 * each extending the cache that the calls before it wrote (chunked prefill, ppo/generation/decoders.ts feedBlock), so a
 * prompt is never too long for a binding, only for memory.
 */
export function callTokens(c: DecoderConfig, tokens: number, loraRank: number, bindingBytes: number): number {
  return Math.max(1, Math.min(tokens, Math.floor(bindingBytes / (widestActivation(c, loraRank) * 4))));
}

/**
 * A block of T tokens as calls of at most `maxTokens` ([from, to) each): as few as that allows, of nearly equal widths.
 * Equal widths keep every call above half of `maxTokens`, so where that is above 64 each call's matmuls and attention
 * take the kernels, and sum in the order, that the whole block in one call would (more than 32 rows:
 * kernels/matmul/matmul.ts, kernels/attention/attention.ts attentionForward): the same keys, values and logits.
 */
export function callSpans(T: number, maxTokens: number): [number, number][] {
  const calls = Math.ceil(T / maxTokens);
  return Array.from({ length: calls }, (_, k) => [Math.floor((k * T) / calls), Math.floor(((k + 1) * T) / calls)]);
}

/**
 * Rows per decode group: as many as keep each tensor a group binds whole within one binding of `bindingBytes` —
 * its KV cache layer, and for calls of up to `maxTokens` tokens (a prefill; multi-turn observations) their widest
 * activation, the LM head's logits and a half cache's float32 copy of one layer. A row whose cache layer (or that
 * copy) is above a binding is a group of its own, its layers bound in windows of slots (cacheWindowSlots). Throws
 * when one row's activations or logits are above a binding.
 */
export function decodeGroupRows(
  c: DecoderConfig,
  shape: { capacity: number; maxTokens: number; cacheDtype: FloatDType; loraRank?: number },
  bindingBytes: number,
): number {
  const f32 = 4;
  const kvWidth = c.numKvHeads * c.headDim;
  const multiToken = shape.maxTokens > 1;
  const widest = widestActivation(c, shape.loraRank ?? 0);
  const windowed = shape.capacity * windowedSlotBytes(c, shape) > bindingBytes;
  const perRow: [string, number][] = [
    ...(windowed
      ? []
      : ([
          ['a KV cache layer', shape.capacity * kvWidth * bytesPerElement(shape.cacheDtype)],
          ...(unpacksCache(c, shape)
            ? ([['a cache layer unpacked to float32', shape.capacity * kvWidth * f32]] as [string, number][])
            : []),
        ] as [string, number][])),
    ...(multiToken
      ? ([
          [`the widest activation of ${shape.maxTokens} tokens`, shape.maxTokens * widest * f32],
          ['the logits', c.vocabSize * f32],
        ] as [string, number][])
      : []),
  ];
  if (perRow.length === 0) return 1;
  const [what, bytes] = perRow.reduce((x, y) => (y[1] > x[1] ? y : x));
  if (bytes > bindingBytes) {
    throw new Error(
      `IncrementalDecoder: one sequence's ${what} (${shape.capacity} cache slots, calls of up to ${shape.maxTokens} ` +
        `tokens) needs ${bytes} bytes, above one binding of ${bindingBytes} (maxStorageBufferBindingSize): lower ` +
        'data.max_prompt_length or data.max_response_length',
    );
  }
  return windowed ? 1 : Math.floor(bindingBytes / bytes);
}

/** Whether calls attend a half cache through a float32 copy of its slots: calls of several tokens, and steps whose
 *  head size decode-attention does not take (the general attention kernel's). */
function unpacksCache(c: DecoderConfig, shape: { maxTokens: number; cacheDtype: FloatDType }): boolean {
  return shape.cacheDtype !== 'f32' && (shape.maxTokens > 1 || !decodeAttentionSupports(c.headDim));
}

/** Bytes a slot of one row's cache layer takes in a binding: the cache's own, or float32 where it is unpacked. */
function windowedSlotBytes(c: DecoderConfig, shape: { maxTokens: number; cacheDtype: FloatDType }): number {
  return c.numKvHeads * c.headDim * (unpacksCache(c, shape) ? 4 : bytesPerElement(shape.cacheDtype));
}

/**
 * Slots per cache window where one row's KV cache layer (capacity × NKV·HS in the cache's dtype, or its float32 copy
 * where calls unpack it) is above one binding of `bindingBytes`: the most that bind and whose windows, and their key
 * masks' (4 bytes a slot), start at multiples of `alignBytes`. Null where the layer binds whole.
 */
export function cacheWindowSlots(
  c: DecoderConfig,
  shape: { capacity: number; maxTokens: number; cacheDtype: FloatDType },
  bindingBytes: number,
  alignBytes: number,
): number | null {
  const slotBytes = windowedSlotBytes(c, shape);
  if (shape.capacity * slotBytes <= bindingBytes) return null;
  const cacheBytes = c.numKvHeads * c.headDim * bytesPerElement(shape.cacheDtype);
  const unit = [cacheBytes, slotBytes, 4].map((bytes) => alignedRows(bytes, alignBytes)).reduce(lcm);
  const slots = Math.floor(bindingBytes / slotBytes / unit) * unit;
  if (slots < 1)
    throw new Error(
      `IncrementalDecoder: ${unit} cache slots (${slotBytes} bytes each), where windows may start, are above one ` +
        `binding of ${bindingBytes}`,
    );
  return slots;
}

/** Logits windows of at least this many rows are a multiple of it: the GPU matmul's widest tile (kernels/matmul
 *  gpuMatmulTiles), so an LM head run window by window multiplies no more tiles than one over every row. */
const LOGITS_WINDOW_TILE = 128;

/** Rows of V float32 logits per window: as many as one binding of `bindingBytes` holds (a multiple of
 *  LOGITS_WINDOW_TILE when that is at least one tile). Each window is a buffer of its own, so no alignment applies. */
export function logitsWindowRows(V: number, bindingBytes: number): number {
  const rows = Math.floor(bindingBytes / (V * 4));
  if (rows < 1)
    throw new Error(
      `IncrementalDecoder: one row of logits (${V} × 4 bytes) is above one binding of ${bindingBytes} bytes ` +
        '(maxStorageBufferBindingSize)',
    );
  return rows >= LOGITS_WINDOW_TILE ? Math.floor(rows / LOGITS_WINDOW_TILE) * LOGITS_WINDOW_TILE : rows;
}

/** [first, rows] of each logits window of `rows` rows: one window when they fit one binding. */
export function logitsWindowSpans(rows: number, V: number, bindingBytes: number): [number, number][] {
  if (rows * V * 4 <= bindingBytes) return [[0, rows]];
  const per = logitsWindowRows(V, bindingBytes);
  return Array.from({ length: Math.ceil(rows / per) }, (_, k) => [k * per, Math.min(per, rows - k * per)]);
}

/** An LM head up to this many elements is transposed too (with the final norm folded into it, one dispatch
 *  fewer a step); a 152k vocabulary's copy would cost 600 MB, and its decode steps take lmHeadLogits. */
const TRANSPOSED_HEAD_MAX_ELEMENTS = 1 << 22;

/** The weights decode steps multiply by transposed copies of (with `decode-weights` transposed): the layers'
 *  projections, and the LM head when it is small. */
export function decodeTransposedWeightNames(c: DecoderConfig): string[] {
  const names = Array.from({ length: c.numLayers }, (_, l) =>
    LINEAR_WEIGHTS.map((name) => `${layerPrefix(l)}.${name}`),
  ).flat();
  if (c.vocabSize * c.hiddenSize <= TRANSPOSED_HEAD_MAX_ELEMENTS) names.push(lmHeadWeightName(c));
  return names;
}

export class IncrementalDecoder {
  readonly cache: KvCache;
  /** The most tokens one call may append: the decode groups are sized for such a call's activations. */
  readonly maxTokens: number;
  /** Work buffers sized by the largest call so far: prefills of many shapes and the decode steps share them. */
  private readonly work: GrowingBuffers;
  /** LoRA adapters applied on top of each projection, as in the training forward (the base weights stay unmerged). */
  private readonly lora: LoraAdapters | null;
  /** Transposed copies of the float32 layer weights (and a small LM head) for decode steps on CPU devices. */
  private readonly transposed: TransposedWeights;
  /** The weights decode steps take transposed (decodeTransposedWeightNames), listed once: each step refreshes them. */
  private readonly transposedNames: string[];

  constructor(
    readonly engine: Engine,
    readonly config: DecoderConfig,
    readonly params: Arena,
    options: {
      maxRows: number;
      capacity: number;
      lora?: LoraAdapters | null;
      cacheDtype?: FloatDType;
      /** The most tokens one call appends (1: decode steps only, rows prefilled elsewhere); capacity when absent. */
      maxTokens?: number;
    },
  ) {
    this.lora = options.lora ?? null;
    if (config.head !== 'causal-lm') throw new Error(`IncrementalDecoder needs a causal-lm config, got ${config.head}`);
    this.maxTokens = options.maxTokens ?? options.capacity;
    const cacheDtype = options.cacheDtype ?? 'f32';
    const groupRows = decodeGroupRows(
      config,
      { capacity: options.capacity, maxTokens: this.maxTokens, cacheDtype, loraRank: this.lora?.maxRank },
      engine.maxBindingBytes,
    );
    const windowSlots = cacheWindowSlots(
      config,
      { capacity: options.capacity, maxTokens: this.maxTokens, cacheDtype },
      engine.maxBindingBytes,
      engine.caps.minStorageBufferOffsetAlignment,
    );
    this.cache = new KvCache(engine, config, options.maxRows, options.capacity, cacheDtype, groupRows, windowSlots);
    this.work = new GrowingBuffers(engine, 'incremental');
    this.transposed = TransposedWeights.acquire(engine, params);
    this.transposedNames = decodeTransposedWeightNames(config);
  }

  /** Starts a new batch of `rows` sequences with an empty cache. */
  reset(rows: number): void {
    this.cache.reset(rows);
  }

  /** Drops finished sequences: keeps the listed rows (ascending), renumbered from 0. */
  keepRows(keep: readonly number[]): void {
    this.cache.keepRows(keep);
  }

  /** Adds `count` empty rows after the held ones, for sequences imported into the cache (KvCache.importRows). */
  addRows(count: number): void {
    this.cache.addRows(count);
  }

  destroy(): void {
    this.cache.destroy();
    this.work.destroy();
    this.transposed.release();
  }

  private param(name: string): Tensor {
    return this.params.get(name);
  }

  /** Whether decode steps multiply by transposed weights: CPU devices, float32 weights that each bind whole. */
  private decodesTransposed(): boolean {
    return (
      layerWeightsAreF32(this.params) &&
      chooseVariant('decode-weights', transposedWeightVariants, this.engine.caps, this.engine.knobs).value &&
      this.transposed.bindsWhole(this.transposedNames)
    );
  }

  /** The transposed copies, by weight name, brought up to date. */
  private transposedWeights(): Map<string, Tensor> {
    this.transposed.refresh(this.transposedNames);
    return new Map(this.transposedNames.map((name) => [name, this.transposed.copy(name)]));
  }

  /** The work buffers shaped for `rows` sequences of T new tokens, the LM head's for `headRows` of them. */
  private buffersFor(rows: number, T: number, headRows: number): { step: StepBuffers; head: HeadBuffers } {
    const c = this.config;
    const R = rows * T;
    // A decode step's buffers are allocated for every row the cache can hold, at its first step: continuous
    // batching drops finished rows and adds rows back as samples arrive, and neither may allocate.
    const allocatedRows = T === 1 ? this.cache.maxRows : rows;
    const t = (name: string, shape: number[]) => {
      const buffer = this.work.get(name, [Math.ceil(elementCount(shape) / rows) * allocatedRows]);
      return buffer.view(buffer.name, 0, shape);
    };
    const qkv = t('qkv', [R, qkvWidth(c)]);
    const step: StepBuffers = {
      x: t('x', [R, c.hiddenSize]),
      normed: t('normed', [R, c.hiddenSize]),
      rstd: t('rstd', [R]),
      qkvRaw: c.qkNorm ? t('qkvRaw', [R, qkvWidth(c)]) : qkv,
      qkvRstd: t('qkvRstd', [c.qkNorm ? R * (c.numHeads + c.numKvHeads) : 1]),
      qkv,
      attnOut: t('attnOut', [R, c.numHeads * c.headDim]),
      lse: t('lse', [rows, c.numHeads, T]),
      gateUp: t('gateUp', [R, 2 * c.intermediateSize]),
      act: t('act', [R, c.intermediateSize]),
      loraHidden: t('loraHidden', [this.lora ? R * this.lora.maxRank : 1]),
    };
    const head: HeadBuffers = {
      last: t('head.last', [headRows, c.hiddenSize]),
      lastNormed: t('head.lastNormed', [headRows, c.hiddenSize]),
      lastRstd: t('head.lastRstd', [headRows]),
      logits: this.logitsBuffer('head.logits', headRows, Math.ceil(headRows / rows) * allocatedRows),
    };
    return { step, head };
  }

  /** (rows, V) logits in the work buffer `name`, allocated for `allocatedRows`: one tensor, or where those are above
   *  one binding, windows of logitsWindowRows rows, each a buffer of its own (`name`, `name`.rows<first>, ...). */
  private logitsBuffer(name: string, rows: number, allocatedRows: number): Tensor {
    const V = this.config.vocabSize;
    const windows = logitsWindowSpans(allocatedRows, V, this.engine.maxBindingBytes);
    const parts = windows.flatMap(([first, count]) => {
      if (first >= rows) return [];
      const buffer = this.work.get(first === 0 ? name : `${name}.rows${first}`, [count * V]);
      return [buffer.view(buffer.name, 0, [Math.min(count, rows - first) * V])];
    });
    return Tensor.split(parts[0].name, [rows, V], parts);
  }

  /** The LM head's matmul `head` (out (rows, V) = a (rows, K) · Wᵀ) window by window of the logits' rows: each window
   *  multiplies its rows of `a` into its own binding. One window: the call itself, on `a` and `out` as they are. */
  private headWindows(
    head: { a: Tensor; rowElements: number; out: Tensor },
    body: (a: Tensor, out: Tensor, rows: number) => void,
  ): void {
    const V = this.config.vocabSize;
    for (const { firstRow, rows, tensor } of this.engine.bindingWindows(head.out, V)) {
      const a = this.rowSpan(head.a, firstRow, rows, head.rowElements, 'head.window', 'in');
      body(a.tensor, tensor, rows);
    }
  }

  /** Rows [first, first + rows) of `t` (rows of `rowElements`) as a tensor a kernel can bind: the tensor itself or
   *  a view where it starts aligned, else the work buffer `name`, holding the rows' values (`in`), copied back into
   *  place by `done` (`out`), both (`inOut`), or neither (`scratch`: an output nobody reads). */
  private rowSpan<D extends Tensor>(
    t: D,
    first: number,
    rows: number,
    rowElements: number,
    name: string,
    use: 'in' | 'out' | 'inOut' | 'scratch',
  ): RowSpan<D> {
    const size = rows * rowElements;
    const none = () => {};
    if (first === 0 && size === t.size) return { tensor: t, done: none };
    const bytes =
      (t.byteOffset + first * rowElements * bytesPerElement(t.dtype)) %
      this.engine.caps.minStorageBufferOffsetAlignment;
    const rowsOf = t.view(`${t.name}[${first}:${first + rows}]`, first * rowElements, [size]) as D;
    if (bytes === 0) return { tensor: rowsOf, done: none };
    const scratch = this.work.get(name, [size], t.dtype) as D;
    if (use === 'in' || use === 'inOut') this.engine.copy(rowsOf, scratch);
    const copyBack = use === 'out' || use === 'inOut';
    return { tensor: scratch, done: copyBack ? () => this.engine.copy(scratch, rowsOf) : none };
  }

  /** The decode groups holding the call's rows [first, first + rows) (one group's, or all of them for a decode step),
   *  with RoPE positions of their rows where the decode kernel rotates. */
  private groupParts(first: number, rows: number, T: number, ropePositions: Tensor<'i32'> | null): GroupPart[] {
    return this.cache.held().flatMap(({ group, rows: held }, i) => {
      if (group.first < first || group.first >= first + rows) return [];
      const at = group.first - first;
      const n = Math.min(held, first + rows - group.first);
      const positions = ropePositions && this.rowSpan(ropePositions, at, n, T, `group${i}.positions`, 'in').tensor;
      return [{ group, rows: n, at, positions }];
    });
  }

  /** Stores layer l's new keys and values in the cache and attends the new queries to every cached slot, group by
   *  group; `part.positions`: q and k are not rotated yet, and the decode kernel does it. */
  private attend(l: number, s: StepBuffers, parts: readonly GroupPart[], slotStart: number, T: number): void {
    const c = this.config;
    const cache = this.cache;
    const W = qkvWidth(c);
    const common = {
      NH: c.numHeads,
      NKV: c.numKvHeads,
      HS: c.headDim,
      maskBatchStride: cache.capacity,
      scale: 1 / Math.sqrt(c.headDim),
    };
    for (const { group, rows, at, positions } of parts) {
      const qkv = this.rowSpan(s.qkv, at, rows, T * W, 'group.qkv', 'in').tensor;
      const out = this.rowSpan(s.attnOut, at, rows, T * c.numHeads * c.headDim, 'group.attnOut', 'out');
      if (T === 1 && decodeAttentionSupports(c.headDim)) {
        decodeAttention(this.engine, {
          ...common,
          qkv,
          kCache: group.k[l],
          vCache: group.v[l],
          keyMask: group.keyMask,
          out: out.tensor,
          B: rows,
          splitRows: cache.rows,
          capacity: cache.capacity,
          slot: slotStart,
          rope: positions ? { positions, theta: c.ropeTheta } : undefined,
          windowSlots: cache.windowSlots ?? undefined,
        });
        out.done();
        continue;
      }
      cache.write(group, l, qkv, rows, slotStart, T);
      if (cache.windowSlots !== null) {
        this.attendInWindows(l, group, qkv, out.tensor, slotStart, T, cache.windowSlots);
        out.done();
        continue;
      }
      const Tk = slotStart + T;
      // A half cache is attended through a float32 copy of its filled slots (the new ones rounded too, as a decode
      // step will read them).
      const keys =
        cache.dtype === 'f32'
          ? { k: group.k[l], v: group.v[l], kvBatchStride: cache.capacity * cache.kvWidth }
          : this.unpackedKeys(group, rows, l, Tk);
      attentionForward(this.engine, {
        ...common,
        B: rows,
        Tq: T,
        Tk,
        qRowStride: W,
        qColOffset: 0,
        kRowStride: cache.kvWidth,
        kColOffset: 0,
        vRowStride: cache.kvWidth,
        vColOffset: 0,
        queryStart: slotStart,
        q: qkv,
        ...keys,
        keyMask: group.keyMask,
        out: out.tensor,
        // Inference never reads the log-sum-exp: a group's part needs no copy back.
        lse: this.rowSpan(s.lse, at, rows, c.numHeads * T, 'group.lse', 'scratch').tensor,
      });
      out.done();
    }
  }

  /**
   * Attention of a one-row group's T new queries (qkv (T, W), out (T, NH·HS)) against its layer l bound in windows of
   * `windowSlots` slots: the queries in pieces that each lie in one window, each piece attending the window its
   * slots are in and the ones before; a later window's partial output merges into the first's by their log-sum-exp
   * (attentionMerge, as training's key windows do). A half cache's window is unpacked to float32 first.
   */
  private attendInWindows(
    l: number,
    group: CacheGroup,
    qkv: Tensor,
    out: Tensor,
    slotStart: number,
    T: number,
    windowSlots: number,
  ): void {
    const c = this.config;
    const e = this.engine;
    const cache = this.cache;
    const kvWidth = cache.kvWidth;
    const W = qkvWidth(c);
    const NH = c.numHeads;
    const NHS = NH * c.headDim;
    const slots = (t: Tensor, first: number, count: number, width: number) =>
      t.view(`${t.name}[${first}:${first + count}]`, first * width, [count * width]);
    const keys = (first: number, count: number): { k: Tensor; v: Tensor } => {
      const k = slots(group.k[l], first, count, kvWidth);
      const v = slots(group.v[l], first, count, kvWidth);
      if (cache.dtype === 'f32') return { k, v };
      const unpacked = {
        k: this.work.get('unpackedK', [count, kvWidth]),
        v: this.work.get('unpackedV', [count, kvWidth]),
      };
      kvCacheUnpack(e, { kCache: k, vCache: v, ...unpacked, B: 1, Tk: count, capacity: count, kvWidth });
      return unpacked;
    };
    const end = slotStart + T;
    for (let a = slotStart; a < end; ) {
      const b = Math.min(end, (Math.floor(a / windowSlots) + 1) * windowSlots);
      const Tq = b - a;
      const q = this.rowSpan(qkv, a - slotStart, Tq, W, 'window.q', 'in').tensor;
      const o = this.rowSpan(out, a - slotStart, Tq, NHS, 'window.out', 'out');
      const lse = this.work.get('window.lse', [NH, Tq]);
      for (let w0 = 0; w0 < b; w0 += windowSlots) {
        const Tk = Math.min(w0 + windowSlots, b) - w0;
        const first = w0 === 0;
        const partOut = first ? o.tensor : this.work.get('window.partOut', [Tq, NHS]);
        const partLse = first ? lse : this.work.get('window.partLse', [NH, Tq]);
        attentionForward(e, {
          NH,
          NKV: c.numKvHeads,
          HS: c.headDim,
          scale: 1 / Math.sqrt(c.headDim),
          B: 1,
          Tq,
          Tk,
          qRowStride: W,
          qColOffset: 0,
          kRowStride: kvWidth,
          kColOffset: 0,
          vRowStride: kvWidth,
          vColOffset: 0,
          queryStart: a - w0,
          q,
          ...keys(w0, Tk),
          kvBatchStride: Tk * kvWidth,
          keyMask: slots(group.keyMask, w0, Tk, 1) as Tensor<'u32'>,
          maskBatchStride: Tk,
          out: partOut,
          lse: partLse,
          keyWindow: true,
        });
        if (!first)
          attentionMerge(e, {
            Tq,
            NH,
            HS: c.headDim,
            queryStart: a,
            keyStart: w0,
            keyEnd: w0 + Tk,
            out: o.tensor,
            lse,
            partOut,
            partLse,
            keyMask: slots(group.keyMask, 0, w0 + Tk, 1) as Tensor<'u32'>,
          });
      }
      o.done();
      a = b;
    }
  }

  /** Slots [0, Tk) of layer l of a group's first `rows` rows of a half cache as float32 (rows, Tk, NKV·HS), for the
   *  general attention. */
  private unpackedKeys(
    group: CacheGroup,
    rows: number,
    l: number,
    Tk: number,
  ): { k: Tensor; v: Tensor; kvBatchStride: number } {
    const cache = this.cache;
    const shape = [rows, Tk, cache.kvWidth];
    const k = this.work.get('unpackedK', shape);
    const v = this.work.get('unpackedV', shape);
    kvCacheUnpack(this.engine, {
      kCache: group.k[l],
      vCache: group.v[l],
      k,
      v,
      B: rows,
      Tk,
      capacity: cache.capacity,
      kvWidth: cache.kvWidth,
    });
    return { k, v, kvBatchStride: Tk * cache.kvWidth };
  }

  /** The A operand of a projection of rmsnorm(x): x with the norm folded into the matmul (decode steps on CPU
   *  devices, one dispatch fewer), or the normed buffer after an rmsnorm dispatch. */
  private normedInput(
    s: Pick<StepBuffers, 'x' | 'normed' | 'rstd'>,
    weightName: string,
    rows: number,
    fuse: boolean,
  ): ProjectionInput {
    const c = this.config;
    const weight = this.param(weightName);
    if (fuse) return { a: s.x, prologue: { kind: 'rmsnorm', weight, eps: c.rmsNormEps } };
    rmsnormForward(this.engine, {
      x: s.x,
      weight,
      out: s.normed,
      rstd: s.rstd,
      rows,
      cols: c.hiddenSize,
      eps: c.rmsNormEps,
    });
    return { a: s.normed };
  }

  /** Layer l of a decode step in one dispatch per decode group: x (rows, C) in place, the new k and v cached at
   *  `slot`. */
  private decodeLayer(
    l: number,
    s: StepBuffers,
    parts: readonly GroupPart[],
    transposed: Map<string, Tensor>,
    slot: number,
  ): void {
    for (const part of parts) {
      const x = this.rowSpan(s.x, part.at, part.rows, this.config.hiddenSize, 'group.x', 'inOut');
      this.decodeGroupLayer(l, x.tensor, part, transposed, slot);
      x.done();
    }
  }

  private decodeGroupLayer(
    l: number,
    x: Tensor,
    { group, rows, positions }: GroupPart,
    transposed: Map<string, Tensor>,
    slot: number,
  ): void {
    const c = this.config;
    const p = layerPrefix(l);
    const cache = this.cache;
    decodeLayer(this.engine, {
      x,
      B: rows,
      C: c.hiddenSize,
      NH: c.numHeads,
      NKV: c.numKvHeads,
      HS: c.headDim,
      I: c.intermediateSize,
      qkvT: transposed.get(`${p}.self_attn.qkv_proj.weight`)!,
      oT: transposed.get(`${p}.self_attn.o_proj.weight`)!,
      gateUpT: transposed.get(`${p}.mlp.gate_up_proj.weight`)!,
      downT: transposed.get(`${p}.mlp.down_proj.weight`)!,
      inputNorm: this.param(`${p}.input_layernorm.weight`),
      postNorm: this.param(`${p}.post_attention_layernorm.weight`),
      qkNorm: c.qkNorm
        ? { q: this.param(`${p}.self_attn.q_norm.weight`), k: this.param(`${p}.self_attn.k_norm.weight`) }
        : undefined,
      qkvBias: c.attentionBias ? this.param(`${p}.self_attn.qkv_proj.bias`) : undefined,
      oBias: c.outputBias ? this.param(`${p}.self_attn.o_proj.bias`) : undefined,
      positions: positions!,
      theta: c.ropeTheta,
      kCache: group.k[l],
      vCache: group.v[l],
      keyMask: group.keyMask,
      capacity: cache.capacity,
      slot,
      maskBatchStride: cache.capacity,
      eps: c.rmsNormEps,
      scale: 1 / Math.sqrt(c.headDim),
    });
  }

  /**
   * Records the forward of T new tokens for every held sequence, appending them to the cache; returns the
   * logits (rows, V) of each row's last new token (everyPosition: (rows·T, V) of every new token), valid until the
   * next call.
   */
  extend(input: ExtendInput): Tensor {
    return this.call(input, input.everyPosition === true && input.T > 1 ? 'every' : 'last')!;
  }

  /** Records the forward of T new tokens for every held sequence, appending them to the cache, without logits: a
   *  block's calls before its last (chunked prefill). */
  append(input: Omit<ExtendInput, 'everyPosition'>): void {
    this.call(input, 'none');
  }

  private call(input: ExtendInput, head: Head): Tensor | null {
    const { ids, positions, T } = input;
    const cache = this.cache;
    const rows = cache.rows;
    const V = this.config.vocabSize;
    if (ids.size !== rows * T || positions.size !== rows * T) {
      throw new Error(
        `IncrementalDecoder.extend: ids (${ids.name}) and positions (${positions.name}) have ${ids.size} and ` +
          `${positions.size} elements, expected rows·T = ${rows}·${T}`,
      );
    }
    if (T > this.maxTokens) {
      throw new Error(
        `IncrementalDecoder.extend: ${T} tokens a row, above the ${this.maxTokens} its decode groups were sized for`,
      );
    }
    const slotStart = cache.reserve(T, input.mask);
    const held = cache.held();
    if (T === 1 || held.length === 1) return this.forward(0, rows, ids, positions, T, slotStart, head);
    // Several tokens a row in several groups: group by group, each one's logits gathered into the call's.
    const perRow = (head === 'every' ? T : 1) * V;
    const logits =
      head === 'none' ? null : this.logitsBuffer('head.groupLogits', rows * (perRow / V), rows * (perRow / V));
    for (const { group, rows: n } of held) {
      const part = (t: Tensor<'u32'> | Tensor<'i32'>, name: string) =>
        this.rowSpan(t, group.first, n, T, name, 'in').tensor;
      const out = this.forward(
        group.first,
        n,
        part(ids, 'group.ids') as Tensor<'u32'>,
        part(positions, 'group.positions') as Tensor<'i32'>,
        T,
        slotStart,
        head,
      );
      if (!out || !logits) continue;
      this.engine.copy(
        out.slice(out.name, 0, n * perRow),
        logits.slice(`${logits.name}[${group.first}:${group.first + n}]`, group.first * perRow, n * perRow),
      );
    }
    return logits;
  }

  /** The forward of T new tokens of the call's rows [first, first + rows) (all of them, or one decode group's), its
   *  `ids` and `positions` theirs; returns the logits of those rows (`head`: which; none: null). */
  private forward(
    first: number,
    rows: number,
    ids: Tensor<'u32'>,
    positions: Tensor<'i32'>,
    T: number,
    slotStart: number,
    head: Head,
  ): Tensor | null {
    const c = this.config;
    const e = this.engine;
    const cache = this.cache;
    const R = rows * T;
    const C = c.hiddenSize;
    const W = qkvWidth(c);
    const I = c.intermediateSize;
    const NHS = c.numHeads * c.headDim;
    const every = head === 'every';
    const headRows = every ? R : rows;
    const { step: s, head: h } = this.buffersFor(rows, T, headRows);

    const transposed = T === 1 && this.decodesTransposed() ? this.transposedWeights() : null;
    // out (+)= a·Wᵀ for the layer weight `name` (N, K): nt against W, or nn against its transposed copy.
    const linear = (name: string, args: Omit<MatmulArgs, 'b' | 'layout'>) => {
      const copy = transposed?.get(name);
      matmul(
        e,
        copy ? { ...args, b: copy, layout: 'nn' } : { ...args, ...weightOperand(this.params, name), layout: 'nt' },
      );
    };
    // Decode steps fold each rmsnorm into the projection after it, and swiglu into down_proj (float32 weights:
    // matmul has no prologue pipelines for a half-precision LoRA base).
    const layout = transposed ? 'nn' : 'nt';
    const fuses = T === 1 && layerWeightsAreF32(this.params);
    const fuseNorm = fuses && useMatmulPrologue(e, layout, C);
    const fuseSwiglu = fuses && useMatmulPrologue(e, layout, I);
    // Against the transposed gate_up, swiglu goes into its matmul's epilogue instead (act straight out, down_proj
    // without a prologue), unless LoRA adds to gate_up before swiglu.
    const swigluOut = fuseSwiglu && transposed !== null && !this.lora;
    // and RoPE into the decode attention kernel.
    const fuseRope = T === 1 && decodeAttentionFusesRope(c.headDim);
    embeddingForward(e, { ids, table: this.param('model.embed_tokens.weight'), out: s.x, N: R, V: c.vocabSize, C });
    // On CPU devices a decode step without LoRA runs each layer as one dispatch (kernels/decode/decode-layer) instead
    // of five.
    const fusedLayers =
      transposed !== null &&
      !this.lora &&
      cache.dtype === 'f32' &&
      cache.windowSlots === null &&
      useDecodeLayer(e, { C, NH: c.numHeads, NKV: c.numKvHeads, HS: c.headDim, I });
    const parts = this.groupParts(first, rows, T, fuseRope || fusedLayers ? positions : null);
    for (let l = 0; l < c.numLayers; l++) {
      if (fusedLayers) {
        this.decodeLayer(l, s, parts, transposed!, slotStart);
        continue;
      }
      const p = layerPrefix(l);
      const qkvInput = this.normedInput(s, `${p}.input_layernorm.weight`, R, fuseNorm);
      linear(`${p}.self_attn.qkv_proj.weight`, {
        ...qkvInput,
        out: s.qkvRaw,
        M: R,
        N: W,
        K: C,
        bias: c.attentionBias ? this.param(`${p}.self_attn.qkv_proj.bias`) : undefined,
      });
      this.lora?.forward(l, 'qkv', qkvInput, s.loraHidden, s.qkvRaw, R);
      if (c.qkNorm) {
        headRmsnormForward(e, {
          qkv: s.qkvRaw,
          qWeight: this.param(`${p}.self_attn.q_norm.weight`),
          kWeight: this.param(`${p}.self_attn.k_norm.weight`),
          out: s.qkv,
          rstd: s.qkvRstd,
          rows: R,
          NH: c.numHeads,
          NKV: c.numKvHeads,
          HS: c.headDim,
          eps: c.rmsNormEps,
        });
      }
      if (!fuseRope)
        ropeForward(e, {
          qkv: s.qkv,
          positions,
          rows: R,
          NH: c.numHeads,
          NKV: c.numKvHeads,
          HS: c.headDim,
          theta: c.ropeTheta,
        });
      this.attend(l, s, parts, slotStart, T);
      linear(`${p}.self_attn.o_proj.weight`, {
        a: s.attnOut,
        out: s.x,
        M: R,
        N: C,
        K: NHS,
        accumulate: true,
        bias: c.outputBias ? this.param(`${p}.self_attn.o_proj.bias`) : undefined,
      });
      this.lora?.forward(l, 'o', { a: s.attnOut }, s.loraHidden, s.x, R);
      const mlpInput = this.normedInput(s, `${p}.post_attention_layernorm.weight`, R, fuseNorm);
      const gateUpName = `${p}.mlp.gate_up_proj.weight`;
      let downInput: ProjectionInput = { a: s.act };
      if (swigluOut) {
        matmul(e, {
          ...mlpInput,
          b: transposed!.get(gateUpName)!,
          out: s.act,
          M: R,
          N: I,
          K: C,
          layout: 'nn',
          epilogue: 'swiglu',
        });
      } else {
        linear(gateUpName, { ...mlpInput, out: s.gateUp, M: R, N: 2 * I, K: C });
        this.lora?.forward(l, 'gateUp', mlpInput, s.loraHidden, s.gateUp, R);
        if (fuseSwiglu) downInput = { a: s.gateUp, prologue: { kind: 'swiglu' } };
        else swigluForward(e, { gateUp: s.gateUp, out: s.act, rows: R, I });
      }
      linear(`${p}.mlp.down_proj.weight`, { ...downInput, out: s.x, M: R, N: C, K: I, accumulate: true });
      this.lora?.forward(l, 'down', downInput, s.loraHidden, s.x, R);
    }
    if (head === 'none') return null;
    // Unless every position's are asked for, only each row's last token needs logits: with T > 1, gather those rows.
    let last = s.x;
    if (T > 1 && !every) {
      for (let b = 0; b < rows; b++)
        e.copy(
          s.x.view(`${s.x.name}[${b}]`, (b * T + T - 1) * C, [C]),
          h.last.view(`${h.last.name}[${b}]`, b * C, [C]),
        );
      last = h.last;
    }
    const headName = lmHeadWeightName(c);
    if (transposed?.has(headName)) {
      const finalNorm = this.normedInput(
        { x: last, normed: h.lastNormed, rstd: h.lastRstd },
        'model.norm.weight',
        headRows,
        fuseNorm,
      );
      this.headWindows({ a: finalNorm.a, rowElements: C, out: h.logits }, (a, out, M) =>
        linear(headName, { ...finalNorm, a, out, M, N: c.vocabSize, K: C }),
      );
      return h.logits;
    }
    rmsnormForward(e, {
      x: last,
      weight: this.param('model.norm.weight'),
      out: h.lastNormed,
      rstd: h.lastRstd,
      rows: headRows,
      cols: C,
      eps: c.rmsNormEps,
    });
    this.headWindows({ a: h.lastNormed, rowElements: C, out: h.logits }, (hidden, out, N) =>
      lmHeadLogits(e, { hidden, weight: this.param(headName), out, N, C, V: c.vocabSize }),
    );
    return h.logits;
  }
}
