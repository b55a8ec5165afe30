// How the decoders hand a layer weight to matmul. A trained model's weights are float32; a frozen LoRA base may
// keep them in its checkpoint's bf16/f16 (read as they are, two per word) — the paths that need float32 weights
// (transposed copies for CPU devices, matmul prologues and epilogues, the fused decode layer) are then skipped.
import type { Arena } from '../engine/index.ts';
import { layerPrefix } from './parameter-layout.ts';

/** Whether the arena's layer projections are float32 (every layer's are stored alike). */
export function layerWeightsAreF32(params: Arena): boolean {
  return params.get(`${layerPrefix(0)}.self_attn.qkv_proj.weight`).dtype === 'f32';
}
