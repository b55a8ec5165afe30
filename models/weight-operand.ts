// How the decoders hand a layer weight to matmul. A trained model's weights are float32; a frozen LoRA base may
// keep them in its checkpoint's bf16/f16 (read as they are, two per word), in NF4 (load_in_4bit: u32 codes and
// their block scales, double-quantized with use_bnb_nested_quant) or in int8 (load_in_8bit: u32 codes and a scale
// per row; models/parameter-layout.ts) — the paths that need float32 weights (transposed copies for CPU devices,
// matmul prologues and epilogues, the fused decode layer) are then skipped.
import type { Arena, Tensor } from '../engine/index.ts';
import type { QuantizedB } from '../kernels/matmul/matmul.ts';
import { INT8_SCB, NF4_ABSMAX, layerPrefix } from './parameter-layout.ts';

/** matmul's B operand for the layer weight `name`: the tensor, and a quantized weight's format and scales. */
export function weightOperand(params: Arena, name: string): { b: Tensor; bQuant?: QuantizedB } {
  if (params.dtypeOf(name) !== 'u32') return { b: params.get(name) };
  const b = params.words(name);
  if (params.has(`${name}${INT8_SCB}`)) return { b, bQuant: { format: 'int8', scb: params.get(`${name}${INT8_SCB}`) } };
  const absmax = `${name}${NF4_ABSMAX}`;
  return {
    b,
    bQuant: { format: 'nf4', absmax: params.dtypeOf(absmax) === 'u32' ? params.words(absmax) : params.get(absmax) },
  };
}

/** Whether the arena's layer projections are float32 (every layer's are stored alike). */
export function layerWeightsAreF32(params: Arena): boolean {
  return params.dtypeOf(`${layerPrefix(0)}.self_attn.qkv_proj.weight`) === 'f32';
}
