// How many samples the rollout decodes at once: every tensor of the decode batch within one binding, the batch
// within the memory budget (gpu_memory_utilization), never more than asked or than there are samples.
import { describe, it, expect } from 'vitest';
import { parseHfConfig } from '../../models/hf-config.ts';
import { rolloutSlots } from '../../ppo/generation/slots.ts';

const LAVAPIPE = { maxBufferSize: 2 ** 32 - 1, maxStorageBufferBindingSize: 2 ** 27 };

function qwen3(hidden: number, heads: number, kvHeads: number, intermediate: number, vocab: number) {
  return parseHfConfig({
    architectures: ['Qwen3ForCausalLM'],
    vocab_size: vocab,
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_hidden_layers: 2,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: 128,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: true,
  });
}

describe('rollout slots', () => {
  it('takes as many slots as one binding and the memory budget hold', () => {
    const m = parseHfConfig({
      architectures: ['LlamaForCausalLM'],
      vocab_size: 61,
      hidden_size: 32,
      intermediate_size: 48,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 8,
      rms_norm_eps: 1e-6,
    });
    const caps = { maxBufferSize: 2 ** 31, maxStorageBufferBindingSize: 2 ** 27 };
    const shape = { promptLength: 100, capacity: 1200, samples: 100_000 };
    const unbounded = rolloutSlots(caps, m, shape, { memoryBudgetBytes: 2 ** 40 });
    // a KV cache layer is (slots, capacity, NKV·HS) floats, the largest tensor here
    expect(unbounded).toBe(Math.floor(2 ** 27 / (1200 * 2 * 8 * 4)));
    const budgeted = rolloutSlots(caps, m, shape, { memoryBudgetBytes: 2 ** 24 });
    expect(budgeted).toBeLessThan(unbounded);
    expect(rolloutSlots(caps, m, shape, { memoryBudgetBytes: 2 ** 24, maxSlots: 3 })).toBe(3);
    expect(rolloutSlots(caps, m, { ...shape, samples: 2 }, { memoryBudgetBytes: 2 ** 40 })).toBe(2);
    expect(() => rolloutSlots(caps, m, shape, { memoryBudgetBytes: 1000 })).toThrow(/gpu_memory_utilization/);
  });

  it(
    "plans the validation that overran lavapipe's binding: 1,319 GSM8K prompts of 211 tokens, 1,024-token " +
      'responses, Qwen3 vocabulary',
    () => {
      const shape = { promptLength: 211, capacity: 211 + 1024 + 17 + 313, samples: 1319 };
      for (const m of [qwen3(128, 2, 1, 384, 151_936), qwen3(1024, 16, 8, 3072, 151_936)]) {
        const slots = rolloutSlots(LAVAPIPE, m, shape, { memoryBudgetBytes: 0.5 * 2 ** 32 });
        expect(slots).toBeGreaterThan(0);
        expect(slots).toBeLessThan(1319);
        const kvWidth = m.numKvHeads * m.headDim;
        const qkvWidth = (m.numHeads + 2 * m.numKvHeads) * m.headDim;
        for (const perSlot of [
          shape.capacity * kvWidth,
          shape.promptLength * qkvWidth,
          shape.promptLength * 2 * m.intermediateSize,
          m.vocabSize,
        ]) {
          expect(slots * perSlot * 4).toBeLessThanOrEqual(LAVAPIPE.maxStorageBufferBindingSize);
        }
      }
    },
  );

  it('a half-precision KV cache (rollout.dtype) nearly doubles the slots a 28-layer model decodes in the same budget', () => {
    // Qwen3-1.7B's shape: 28 layers of 8 KV heads × 128, prompts of 256 and a cache of 1,041 slots.
    const m = parseHfConfig({
      architectures: ['Qwen3ForCausalLM'],
      vocab_size: 151_936,
      hidden_size: 2048,
      intermediate_size: 6144,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: true,
    });
    const caps = { maxBufferSize: 2 ** 40, maxStorageBufferBindingSize: 2 ** 40 };
    const shape = { promptLength: 256, capacity: 1041, samples: 100_000 };
    const budget = { memoryBudgetBytes: 12 * 2 ** 30 };
    const f32 = rolloutSlots(caps, m, shape, budget);
    const bf16 = rolloutSlots(caps, m, { ...shape, cacheDtype: 'bf16', blockKeys: 256 }, budget);
    // Per slot in float32: the caches' (57 layers of k or v) × (1,041 + 256) slots × 1,024 × 4 B = 303 MB of 339 MB
    // (the prefill's activations are 36 MB); in bf16 the caches take half that, plus a 2 MB float32 copy of one
    // prefill layer: 190 MB, 1.79 times the slots.
    expect(bf16 / f32).toBeGreaterThan(1.75);
    expect(bf16 / f32).toBeLessThan(2);
    // Multi-turn appends attend the whole cache through that copy: a little less.
    expect(rolloutSlots(caps, m, { ...shape, cacheDtype: 'bf16' }, budget)).toBeLessThan(bf16);
  });
});
