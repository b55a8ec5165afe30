// The parameter table of a Llama/Qwen2/Qwen3 decoder: which tensors exist, their shapes, and how the engine's
// fused tensors map to Hugging Face names. q/k/v projections live in one [(NH+2·NKV)·HS, C] tensor and gate/up
// in one [2·I, C] tensor so each needs a single matmul; loading and saving split them back into HF's names.
import type { ArenaEntry, FloatDType } from '../engine/index.ts';
import { nf4Sizes } from '../engine/nf4.ts';
import { int8Sizes } from '../engine/int8.ts';
import { TORCH_DTYPE_STORAGE, type DecoderConfig } from './hf-config.ts';

/** How a model's matrices are stored: float32, bf16/f16 (frozen weights), or a frozen LoRA base's layer
 *  projections quantized: NF4 (QLoRA; engine/nf4.ts), NF4 with double-quantized block scales (nf4-nested), or
 *  LLM.int8's row-wise int8 (engine/int8.ts). */
export type WeightStorage = FloatDType | QuantizedStorage;
export type QuantizedStorage = 'nf4' | 'nf4-nested' | 'int8';

/** Whether `storage` quantizes the layer projections. */
export function isQuantized(storage: WeightStorage): storage is QuantizedStorage {
  return storage === 'nf4' || storage === 'nf4-nested' || storage === 'int8';
}

/** The suffix of an NF4 weight's block-scale tensor: `${name}.absmax` holds the float32 absmax of each block of
 *  64 (u32 words of double-quantized ones under nf4-nested), `${name}` itself the codes as u32 words. */
export const NF4_ABSMAX = '.absmax';

/** The suffix of an int8 weight's row scales (bitsandbytes' Int8Params.SCB: each row's float32 absmax). */
export const INT8_SCB = '.SCB';

export interface HfSlice {
  /** Hugging Face tensor name. */
  hfName: string;
  /** Engine tensor it lives in, and the row range inside it (rows of the leading dimension). */
  tensor: string;
  rowStart: number;
  shape: readonly number[];
}

export function qkvWidth(c: DecoderConfig): number {
  return (c.numHeads + 2 * c.numKvHeads) * c.headDim;
}

export function layerPrefix(layer: number): string {
  return `model.layers.${layer}`;
}

/**
 * Engine tensors of the trunk (embedding, layers, final norm), plus the head the config asks for. `storage` (a
 * frozen model's: bf16/f16) applies to the matrices of the trunk and the LM head — nearly all the bytes, and
 * every one read by a kernel with a half path (matmul's B, the embedding); norms, biases and the value/score
 * head stay float32. The quantized storages quantize the layer projections, as bitsandbytes quantizes nn.Linear
 * and skips the embedding and lm_head: each becomes its u32 codes and its scales (`.absmax`, or `.SCB` for int8),
 * and the embedding and LM head keep the checkpoint's dtype.
 */
export function parameterEntries(c: DecoderConfig, storage: WeightStorage = 'f32'): ArenaEntry[] {
  const matrices = isQuantized(storage) ? TORCH_DTYPE_STORAGE[c.torchDtype] : storage;
  return trunkAndHeadEntries(c).flatMap((entry): ArenaEntry[] => {
    if (!storesWeightDtype(entry)) return [entry];
    if (!isQuantized(storage) || !isLayerMatrix(entry.name)) return [{ ...entry, dtype: matrices }];
    const [rows, cols] = entry.shape;
    if (storage === 'int8')
      return [
        { name: entry.name, shape: [int8Sizes(rows, cols).words], dtype: 'u32' },
        { name: `${entry.name}${INT8_SCB}`, shape: [rows] },
      ];
    const { words, statistics } = nf4Sizes(rows * cols, storage === 'nf4-nested');
    return [
      { name: entry.name, shape: [words], dtype: 'u32' },
      {
        name: `${entry.name}${NF4_ABSMAX}`,
        shape: [statistics],
        ...(storage === 'nf4-nested' ? { dtype: 'u32' } : {}),
      },
    ];
  });
}

function storesWeightDtype(entry: ArenaEntry): boolean {
  return entry.shape.length === 2 && !entry.name.startsWith('score.');
}

/** A layer projection (qkv, o, gate_up, down): the matrices NF4 and int8 quantize. */
export function isLayerMatrix(name: string): boolean {
  return name.startsWith('model.layers.') && name.endsWith('_proj.weight');
}

function trunkAndHeadEntries(c: DecoderConfig): ArenaEntry[] {
  const C = c.hiddenSize;
  const entries: ArenaEntry[] = [{ name: 'model.embed_tokens.weight', shape: [c.vocabSize, C] }];
  for (let l = 0; l < c.numLayers; l++) {
    const p = layerPrefix(l);
    entries.push({ name: `${p}.input_layernorm.weight`, shape: [C] });
    entries.push({ name: `${p}.self_attn.qkv_proj.weight`, shape: [qkvWidth(c), C] });
    if (c.attentionBias) entries.push({ name: `${p}.self_attn.qkv_proj.bias`, shape: [qkvWidth(c)] });
    if (c.qkNorm) {
      entries.push({ name: `${p}.self_attn.q_norm.weight`, shape: [c.headDim] });
      entries.push({ name: `${p}.self_attn.k_norm.weight`, shape: [c.headDim] });
    }
    entries.push({ name: `${p}.self_attn.o_proj.weight`, shape: [C, c.numHeads * c.headDim] });
    if (c.outputBias) entries.push({ name: `${p}.self_attn.o_proj.bias`, shape: [C] });
    entries.push({ name: `${p}.post_attention_layernorm.weight`, shape: [C] });
    entries.push({ name: `${p}.mlp.gate_up_proj.weight`, shape: [2 * c.intermediateSize, C] });
    entries.push({ name: `${p}.mlp.down_proj.weight`, shape: [C, c.intermediateSize] });
  }
  entries.push({ name: 'model.norm.weight', shape: [C] });
  entries.push(...headEntries(c));
  return entries;
}

/** The head's tensors: lm_head (untied), or a classifier's score (a LoRA critic trains these beside its adapters). */
export function headEntries(c: DecoderConfig): ArenaEntry[] {
  switch (c.head) {
    case 'causal-lm':
      return c.tieWordEmbeddings ? [] : [{ name: 'lm_head.weight', shape: [c.vocabSize, c.hiddenSize] }];
    case 'token-classification':
      return [
        { name: 'score.weight', shape: [1, c.hiddenSize] },
        { name: 'score.bias', shape: [1] },
      ];
    case 'sequence-classification':
      return [{ name: 'score.weight', shape: [1, c.hiddenSize] }];
  }
}

/** Name of the tensor holding the LM head weight (the embedding when tied). */
export function lmHeadWeightName(c: DecoderConfig): string {
  return c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
}

/** Every Hugging Face tensor of this config and where it lives in the engine's tensors. */
export function hfSlices(c: DecoderConfig): HfSlice[] {
  const C = c.hiddenSize;
  const HS = c.headDim;
  const slices: HfSlice[] = [];
  const whole = (name: string, shape: readonly number[]) =>
    slices.push({ hfName: name, tensor: name, rowStart: 0, shape });
  for (const entry of parameterEntries(c)) {
    const name = entry.name;
    if (name.endsWith('.qkv_proj.weight') || name.endsWith('.qkv_proj.bias')) {
      const base = name.replace('.qkv_proj.', '.');
      const kind = name.endsWith('weight') ? 'weight' : 'bias';
      const tail = (rows: number) => (kind === 'weight' ? [rows, C] : [rows]);
      const attn = base.slice(0, base.lastIndexOf(`.${kind}`));
      slices.push({ hfName: `${attn}.q_proj.${kind}`, tensor: name, rowStart: 0, shape: tail(c.numHeads * HS) });
      slices.push({
        hfName: `${attn}.k_proj.${kind}`,
        tensor: name,
        rowStart: c.numHeads * HS,
        shape: tail(c.numKvHeads * HS),
      });
      slices.push({
        hfName: `${attn}.v_proj.${kind}`,
        tensor: name,
        rowStart: (c.numHeads + c.numKvHeads) * HS,
        shape: tail(c.numKvHeads * HS),
      });
    } else if (name.endsWith('.gate_up_proj.weight')) {
      const mlp = name.slice(0, -'.gate_up_proj.weight'.length);
      slices.push({ hfName: `${mlp}.gate_proj.weight`, tensor: name, rowStart: 0, shape: [c.intermediateSize, C] });
      slices.push({
        hfName: `${mlp}.up_proj.weight`,
        tensor: name,
        rowStart: c.intermediateSize,
        shape: [c.intermediateSize, C],
      });
    } else {
      whole(name, entry.shape);
    }
  }
  return slices;
}

/** Every tensor a complete HF checkpoint of this config holds, with its shape ([out, in] for linears). */
export function checkpointTensorShapes(c: DecoderConfig): Map<string, number[]> {
  return new Map(hfSlices(c).map((slice) => [slice.hfName, [...slice.shape]]));
}
