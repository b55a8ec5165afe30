// The rollout's weights in actor_rollout_ref.rollout.dtype (ppo/generation/rollout-weights.ts): a bfloat16 copy of
// a float32 actor holds its values rounded to nearest even, is remade before a rollout exactly when the actor's
// weights were written since (an optimizer step, an upload), and nothing is copied for float32, for a LoRA base
// already stored in half precision, or beside the actor's mixed-precision compute copy of the same dtype.
import { describe, it, expect, vi } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { roundToHalf, type KernelSpec } from '../../engine/index.ts';
import { parseHfConfig } from '../../models/hf-config.ts';
import { initialParameters } from '../../models/init.ts';
import { createParameterArena, uploadArenaTensors } from '../../models/parameter-store.ts';
import { RolloutWeights } from '../../ppo/generation/rollout-weights.ts';
import { DecoderTrunk } from '../../models/decoder.ts';

const config = parseHfConfig({
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 61,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: false,
});

describe('rollout weights (actor_rollout_ref.rollout.dtype)', () => {
  it('a bfloat16 copy of a float32 actor, remade only after the actor is written', async () => {
    const engine = await gpuEngine();
    const params = createParameterArena(engine, config, 'rollout-weights-actor');
    uploadArenaTensors(engine, params, initialParameters(config, 3, 0.35));
    const weights = new RolloutWeights(engine, { config, params }, 'bf16');
    const qkv = 'model.layers.1.self_attn.qkv_proj.weight';
    const norm = 'model.layers.1.input_layernorm.weight';
    const conversions = (work: () => void) => {
      const dispatch = vi.spyOn(engine, 'dispatch');
      try {
        work();
        return dispatch.mock.calls.filter(([spec]) => (spec as KernelSpec).name.startsWith('to-half/')).length;
      } finally {
        dispatch.mockRestore();
      }
    };
    try {
      expect(weights.policy.params).not.toBe(params);
      expect(weights.policy.cacheDtype).toBe('bf16');
      expect(weights.policy.params.dtypeOf(qkv)).toBe('bf16');
      expect(await engine.read(weights.policy.params.get(qkv))).toEqual(
        roundToHalf('bf16', await engine.read(params.get(qkv))),
      );
      // Norms stay float32, copied as they are.
      expect(await engine.read(weights.policy.params.get(norm))).toEqual(await engine.read(params.get(norm)));
      expect(conversions(() => weights.refresh())).toBe(0);
      uploadArenaTensors(engine, params, initialParameters(config, 4, 0.35));
      expect(conversions(() => weights.refresh())).toBeGreaterThan(0);
      expect(await engine.read(weights.policy.params.get(qkv))).toEqual(
        roundToHalf('bf16', await engine.read(params.get(qkv))),
      );
      expect(conversions(() => weights.refresh())).toBe(0);
    } finally {
      weights.destroy();
    }
  });

  it('decodes with the actor itself for float32, and a half LoRA base as stored', async () => {
    const engine = await gpuEngine();
    const params = createParameterArena(engine, config, 'rollout-weights-f32');
    expect(new RolloutWeights(engine, { config, params }, 'f32').policy.params).toBe(params);
    const base = createParameterArena(engine, config, 'rollout-weights-bf16-base', 'bf16');
    const weights = new RolloutWeights(engine, { config, params: base }, 'bf16');
    expect(weights.policy.params).toBe(base);
    expect(weights.policy.cacheDtype).toBe('bf16');
  });

  it("decodes from the actor's compute copy of the same dtype, and makes its own for another", async () => {
    const engine = await gpuEngine();
    const params = createParameterArena(engine, config, 'rollout-weights-mixed');
    uploadArenaTensors(engine, params, initialParameters(config, 3, 0.35));
    const trunk = new DecoderTrunk(engine, config, params);
    trunk.setComputeDtype('bf16');
    const shared = new RolloutWeights(engine, { config, params }, 'bf16', trunk.computeCopy);
    expect(shared.policy.params).toBe(trunk.weights);
    // The trunk owns it: the rollout's destroy leaves it alive.
    shared.destroy();
    const qkv = 'model.layers.1.self_attn.qkv_proj.weight';
    expect(await engine.read(trunk.weights.get(qkv))).toEqual(roundToHalf('bf16', await engine.read(params.get(qkv))));
    const own = new RolloutWeights(engine, { config, params }, 'f16', trunk.computeCopy);
    expect(own.policy.params).not.toBe(trunk.weights);
    expect(own.policy.params.dtypeOf(qkv)).toBe('f16');
    own.destroy();
  });
});
