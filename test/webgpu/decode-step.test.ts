// A decode step's dispatch count and its fusions: on a CPU device the rmsnorms fold into the projections after
// them, swiglu into down_proj and RoPE into the decode attention (kernels/matmul-register.wgsl prologues,
// kernels/decode-attention.wgsl), and the logits equal those of the unfused kernels.
import { describe, it, expect } from 'vitest';
import { gpuEngine } from './gpu.ts';
import type { Engine } from '../../engine/index.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { expectClose } from '../helpers.ts';

function config(architecture: string): DecoderConfig {
  return parseHfConfig({
    architectures: [architecture], vocab_size: 61, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2,
    num_attention_heads: 4, num_key_value_heads: 2, head_dim: 8, rms_norm_eps: 1e-6, rope_theta: 10000,
    tie_word_embeddings: false,
  });
}

/** Dispatches and logits of one decode step after a 3-token prefill of 2 rows, with matmul-prologue `variant`. */
async function decodeStep(engine: Engine, c: DecoderConfig, variant: string): Promise<{ dispatches: number; logits: ArrayLike<number> }> {
  const params = createParameterArena(engine, c, `decode-step-${c.architecture}-${variant}`);
  uploadArenaTensors(engine, params, initialParameters(c, 3, 0.35));
  engine.knobs.kernelVariants['matmul-prologue'] = variant;
  const decoder = new IncrementalDecoder(engine, c, params, { maxRows: 2, capacity: 8 });
  try {
    decoder.reset(2);
    const T = 3;
    decoder.extend({
      ids: engine.tensorFrom('ids', [2 * T], [5, 9, 12, 7, 3, 40], 'u32'),
      positions: engine.tensorFrom('positions', [2 * T], [0, 1, 2, 0, 1, 2], 'i32'), T, mask: null,
    });
    const ids = engine.tensorFrom('next', [2], [17, 33], 'u32');
    const positions = engine.tensorFrom('nextPositions', [2], [3, 3], 'i32');
    const before = engine.dispatchCount;
    const logits = decoder.extend({ ids, positions, T: 1, mask: null });
    const dispatches = engine.dispatchCount - before;
    return { dispatches, logits: await engine.read(logits) };
  } finally {
    delete engine.knobs.kernelVariants['matmul-prologue'];
    decoder.destroy();
  }
}

describe('decode step', () => {
  for (const architecture of ['LlamaForCausalLM', 'Qwen3ForCausalLM']) {
    it(`${architecture}: fused and separate kernels give the same logits; fused costs 5 dispatches per layer (+1 for q/k norm)`, async () => {
      const engine = await gpuEngine();
      const c = config(architecture);
      const fused = await decodeStep(engine, c, 'fused');
      const separate = await decodeStep(engine, c, 'separate');
      expectClose(fused.logits, separate.logits, 1e-5, 1e-5, 'logits');
      // embedding; per layer qkv, [q/k norm], attention, o_proj, gate_up, down; final norm and LM head.
      const perLayer = 5 + (c.qkNorm ? 1 : 0);
      expect(fused.dispatches).toBe(1 + c.numLayers * perLayer + 2);
      // Separate: the two rmsnorms and swiglu come back (RoPE stays fused: it is not a CPU-only choice).
      expect(separate.dispatches).toBe(fused.dispatches + 3 * c.numLayers);
    });
  }
});
