// How the decoders hand a layer weight to matmul. A trained model's weights are float32; a frozen LoRA base may
// keep them in its checkpoint's bf16/f16 (read as they are, two per word) or in NF4 (load_in_4bit: u32 codes and
// their block scales, models/parameter-layout.ts) — the paths that need float32 weights (transposed copies for CPU
// devices, matmul prologues and epilogues, the fused decode layer) are then skipped.
import type { Arena, Tensor } from '../engine/index.ts';
import { NF4_ABSMAX, layerPrefix } from './parameter-layout.ts';

/** matmul's B operand for the layer weight `name`: the tensor, and an NF4 weight's block scales. */
export function weightOperand(params: Arena, name: string): { b: Tensor; bAbsmax?: Tensor } {
  if (params.dtypeOf(name) !== 'u32') return { b: params.get(name) };
  return { b: params.words(name), bAbsmax: params.get(`${name}${NF4_ABSMAX}`) };
}

/** Whether the arena's layer projections are float32 (every layer's are stored alike). */
export function layerWeightsAreF32(params: Arena): boolean {
  return params.dtypeOf(`${layerPrefix(0)}.self_attn.qkv_proj.weight`) === 'f32';
}
