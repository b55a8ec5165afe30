// How many samples decode at once (the rollout's slots): as many as the memory budget holds (verl's
// rollout.gpu_memory_utilization of the device), counted tensor by tensor as the rollout's IncrementalDecoders
// allocate them. One storage binding no longer bounds them: the KV cache and the multi-token calls' activations come
// in decode groups that each fit one (models/incremental-decoder.ts decodeGroupRows), and a prompt whose activations
// outgrow one is prefilled in calls of fewer tokens (callTokens), logits over more rows than one binding holds come
// in windows of rows, each a buffer of its own that the LM head and the sampler take in turn (logitsWindowSpans), and
// one sequence's cache layer above one is bound in windows of slots (cacheWindowSlots); only a decode step's widest
// activation over every row still does (2,730 rows of Qwen3-1.7B's MLP at 128 MiB).
// The memory plan (ppo/jobs/memory-plan.ts) lists the same items.
import type { DeviceCapabilities } from '../../engine/device.ts';
import { bytesPerElement, type FloatDType } from '../../engine/index.ts';
import type { DecoderConfig } from '../../models/hf-config.ts';
import {
  cacheWindowSlots,
  callTokens,
  decodeGroupRows,
  logitsWindowSpans,
  widestActivation,
} from '../../models/incremental-decoder.ts';
import { qkvWidth } from '../../models/parameter-layout.ts';
import { decodeAttentionSupports } from '../../kernels/decode/decode-attention.ts';
import type { RolloutConfig } from './types.ts';

/** minStorageBufferOffsetAlignment at its largest (WebGPU allows no more): where cache windows may start on any
 *  device. */
const BINDING_ALIGN_BYTES = 256;

const F32 = 4;

/** The rollout's decode batch: prompts of P tokens, a decode cache of `capacity` slots, `samples` to decode. */
export interface RolloutShape {
  promptLength: number;
  capacity: number;
  samples: number;
  /** The KV cache's storage (rollout.dtype); float32 when absent. */
  cacheDtype?: FloatDType;
  /** Multi-turn: prompts and observations go into the decode cache itself, in calls of up to this many tokens
   *  (max(P, R)). Absent: continuous batching, whose prompts are prefilled in a decoder of their own. */
  blockTokens?: number;
  /** The actor's LoRA rank (its adapters' hidden activation); 0 when absent. */
  loraRank?: number;
}

/** One allocation of the rollout, as the memory plan lists it; `key` names its buffer across phases. */
export interface RolloutMemoryItem {
  what: string;
  bytes: number;
  key: string;
}

/** Float32 elements an IncrementalDecoder's work buffers take per token of a call and per row of its LM head. */
export function incrementalWork(c: DecoderConfig, loraRank: number): { perToken: number; perRow: number } {
  const W = qkvWidth(c);
  const qkv = c.qkNorm ? 2 * W + c.numHeads + c.numKvHeads : W;
  return {
    perToken: 2 * c.hiddenSize + 1 + qkv + c.numHeads * c.headDim + c.numHeads + 3 * c.intermediateSize + 3 * loraRank,
    perRow: 2 * c.hiddenSize + 1 + c.vocabSize,
  };
}

/**
 * Bytes of an IncrementalDecoder of `rows` rows and `capacity` cache slots whose calls append up to `maxTokens`
 * tokens (`steps`: it also takes decode steps over every row): its KV cache (keys and values of every layer, the
 * key mask, one group's layer of compaction scratch), its work buffers (a decode step's for every row, a
 * multi-token call's for one group's rows, the logits gathered from several groups, the groups' copies), and a half
 * cache's float32 copy of one group's layer (multi-token calls attend through it).
 */
function decoderBytes(
  m: DecoderConfig,
  d: { rows: number; capacity: number; maxTokens: number; steps: boolean },
  cacheDtype: FloatDType,
  loraRank: number,
  bindingBytes: number,
): {
  cache: number;
  work: number;
  unpacked: number;
  groupRows: number;
  groups: number;
  callTokens: number;
  windowSlots: number | null;
} {
  const kvWidth = m.numKvHeads * m.headDim;
  const cacheBytes = bytesPerElement(cacheDtype);
  // A block wider than a binding's worth of activations goes in as several calls (chunked prefill).
  const maxTokens = callTokens(m, d.maxTokens, loraRank, bindingBytes);
  const g = decodeGroupRows(m, { capacity: d.capacity, maxTokens, cacheDtype, loraRank }, bindingBytes);
  const n = Math.min(g, d.rows);
  const groups = Math.ceil(d.rows / g);
  const multiToken = maxTokens > 1;
  const { perToken, perRow } = incrementalWork(m, loraRank);
  // Buffers of one name serve both kinds of call, at the larger size; the logits's windows too, window by window.
  const tokenRows = Math.max(d.steps ? d.rows : 0, multiToken ? n * maxTokens : 0);
  const headRows = Math.max(d.steps ? d.rows : 0, multiToken ? n : 0);
  const stepWindows = logitsWindowSpans(d.steps ? d.rows : 0, m.vocabSize, bindingBytes);
  const logitRows = stepWindows.reduce((sum, [first, rows]) => sum + (first === 0 ? Math.max(rows, n) : rows), 0);
  const logits = (multiToken ? logitRows : headRows) * m.vocabSize;
  const gathered = multiToken && groups > 1 ? d.rows * m.vocabSize : 0;
  // Where a group's rows start at an offset a binding cannot (models/incremental-decoder.ts rowSpan), they are copied
  // to buffers of one group's rows: a multi-token call's ids and positions; a decode step's positions per group, its
  // qkv, attention output and log-sum-exp, and the residual of a fused layer. Counted whenever there are groups.
  const NHS = m.numHeads * m.headDim;
  const copies =
    groups > 1
      ? (multiToken ? 2 * n * maxTokens : 0) +
        (d.steps ? groups * n + n * (qkvWidth(m) + NHS + m.numHeads + m.hiddenSize) : 0)
      : 0;
  const unpacks = cacheDtype !== 'f32' && (multiToken || !decodeAttentionSupports(m.headDim));
  // A row's layer above a binding is attended (and unpacked) a window of slots at a time.
  const windowSlots = cacheWindowSlots(
    m,
    { capacity: d.capacity, maxTokens, cacheDtype },
    bindingBytes,
    BINDING_ALIGN_BYTES,
  );
  return {
    cache: (2 * m.numLayers * d.rows + n) * d.capacity * kvWidth * cacheBytes + d.rows * d.capacity * F32,
    work: (tokenRows * perToken + headRows * (perRow - m.vocabSize) + logits + gathered + copies) * F32,
    unpacked: unpacks ? 2 * n * (windowSlots ?? d.capacity) * kvWidth * F32 : 0,
    windowSlots,
    groupRows: n,
    groups,
    callTokens: maxTokens,
  };
}

/** The rollout's allocations for S slots, and the largest tensor among them. */
export function rolloutMemory(
  bindingBytes: number,
  m: DecoderConfig,
  shape: RolloutShape,
  S: number,
): { items: RolloutMemoryItem[]; largest: { what: string; bytes: number } } {
  const P = shape.promptLength;
  const cacheDtype = shape.cacheDtype ?? 'f32';
  const loraRank = shape.loraRank ?? 0;
  const note = cacheDtype === 'f32' ? '' : `, ${cacheDtype}`;
  const kvWidth = m.numKvHeads * m.headDim;
  const groupNote = (d: { groups: number; groupRows: number }) =>
    d.groups > 1 ? `, ${d.groups} groups of ${d.groupRows}` : '';
  const decode = decoderBytes(
    m,
    { rows: S, capacity: shape.capacity, maxTokens: shape.blockTokens ?? 1, steps: true },
    cacheDtype,
    loraRank,
    bindingBytes,
  );
  const items: RolloutMemoryItem[] = [
    {
      what: `KV cache (${S} sequences × ${shape.capacity} slots × ${m.numLayers} layers × K,V${note}${groupNote(decode)})`,
      bytes: decode.cache,
      key: 'rollout decode cache',
    },
    {
      what:
        shape.blockTokens === undefined
          ? `decode step buffers and sampling logits (${S} × ${m.vocabSize})`
          : `decode step and observation buffers, logits (${S} × ${m.vocabSize})`,
      bytes: decode.work + decode.unpacked,
      key: 'rollout decode buffers',
    },
  ];
  // A row's layer above a binding is one buffer that its calls bind a window of slots at a time.
  const windowSlots = decode.windowSlots;
  const largest = [
    windowSlots === null
      ? {
          what: 'KV cache of one layer of one decode group',
          bytes: decode.groupRows * shape.capacity * kvWidth * bytesPerElement(cacheDtype),
        }
      : {
          what: `window of one sequence's KV cache layer (${windowSlots} of ${shape.capacity} slots)`,
          bytes: windowSlots * kvWidth * bytesPerElement(cacheDtype),
        },
    { what: 'sampling logits', bytes: logitsWindowSpans(S, m.vocabSize, bindingBytes)[0][1] * m.vocabSize * F32 },
  ];
  if (shape.blockTokens === undefined) {
    const prefill = decoderBytes(
      m,
      { rows: S, capacity: P, maxTokens: P, steps: false },
      cacheDtype,
      loraRank,
      bindingBytes,
    );
    items.push({
      what: `prefill KV cache (${S} × ${P} prompt tokens${note})`,
      bytes: prefill.cache,
      key: 'rollout prefill cache',
    });
    if (prefill.unpacked > 0) {
      items.push({
        what: `float32 copy of one ${cacheDtype} prefill cache layer (${prefill.groupRows} × ${P} slots × K,V)`,
        bytes: prefill.unpacked,
        key: 'rollout unpacked cache layer',
      });
    }
    const chunked = prefill.callTokens < P ? ` in chunks of ${prefill.callTokens}` : '';
    items.push({
      what: `prefill activations and logits (${prefill.groupRows} of ${S} sequences at a time × ${P} prompt tokens${chunked})`,
      bytes: prefill.work,
      key: 'rollout prefill buffers',
    });
    const widest = widestActivation(m, loraRank);
    largest.push({
      what: 'widest prefill activation',
      bytes: prefill.groupRows * prefill.callTokens * widest * F32,
    });
  }
  return { items, largest: largest.reduce((a, b) => (b.bytes > a.bytes ? b : a)) };
}

/**
 * How many samples decode at once: as many as the memory budget holds, at most what a decode step's widest activation
 * over every row lets one binding (maxStorageBufferBindingSize, maxBufferSize) hold, never more than asked or than
 * there are samples. Its logits come in windows (logitsWindowSpans): they bound nothing but memory.
 */
export function rolloutSlots(
  caps: Pick<DeviceCapabilities, 'maxBufferSize' | 'maxStorageBufferBindingSize'>,
  m: DecoderConfig,
  shape: RolloutShape,
  c: Pick<RolloutConfig, 'memoryBudgetBytes' | 'maxSlots'>,
): number {
  const binding = Math.min(caps.maxStorageBufferBindingSize, caps.maxBufferSize);
  const bytes = (S: number) => rolloutMemory(binding, m, shape, S).items.reduce((n, i) => n + i.bytes, 0);
  // A decode step's activations span every row: the only tensors neither decode groups nor logits windows split.
  const widest = widestActivation(m, shape.loraRank ?? 0);
  const stepRows = Math.floor(binding / (widest * F32));
  const budget = c.memoryBudgetBytes ?? Infinity;
  const most = Math.min(shape.samples, c.maxSlots ?? Infinity, stepRows);
  if (most < 1 || bytes(1) > budget) {
    throw new Error(
      `rollout: one sample (prompt ${shape.promptLength} + cache ${shape.capacity} slots) needs ${bytes(1)} bytes ` +
        `and ${widest * F32} bytes for a decode step's widest activation; the budget is ${budget} bytes ` +
        `(actor_rollout_ref.rollout.gpu_memory_utilization) and one binding holds ${binding}: lower ` +
        'data.max_prompt_length or data.max_response_length, or raise gpu_memory_utilization',
    );
  }
  // The largest S within the budget (bytes grow with S).
  let [low, high] = [1, most];
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (bytes(mid) <= budget) low = mid;
    else high = mid - 1;
  }
  return low;
}
