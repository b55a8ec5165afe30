// How many samples the rollout decodes at once: the batch within the memory budget (gpu_memory_utilization), never
// more than asked or than there are samples; one binding bounds only a decode step's tensors over every row, the KV
// cache and the prefills coming in decode groups that each fit one.
import { describe, it, expect } from 'vitest';
import { parseHfConfig } from '../../models/hf-config.ts';
import { rolloutMemory, rolloutSlots } from '../../ppo/generation/slots.ts';

const LAVAPIPE = { maxBufferSize: 2 ** 32 - 1, maxStorageBufferBindingSize: 2 ** 27 };

function qwen3Of(hidden: number, layers: number, heads: number, kvHeads: number, intermediate: number) {
  return parseHfConfig({
    architectures: ['Qwen3ForCausalLM'],
    vocab_size: 151_936,
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: 128,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: true,
  });
}

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
  it('takes as many slots as the memory budget holds', () => {
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
    const shape = { promptLength: 100, capacity: 1200, samples: 1_000_000 };
    // Only a decode step's rows bind whole: its widest activation, gate_up (2·48 floats a row), is the bound.
    expect(rolloutSlots(caps, m, shape, { memoryBudgetBytes: 2 ** 50 })).toBe(Math.floor(2 ** 27 / (96 * 4)));
    const budgeted = rolloutSlots(caps, m, shape, { memoryBudgetBytes: 2 ** 24 });
    const bytes = (S: number) => rolloutMemory(2 ** 27, m, shape, S).items.reduce((n, i) => n + i.bytes, 0);
    expect(bytes(budgeted)).toBeLessThanOrEqual(2 ** 24);
    expect(bytes(budgeted + 1)).toBeGreaterThan(2 ** 24);
    expect(rolloutSlots(caps, m, shape, { memoryBudgetBytes: 2 ** 24, maxSlots: 3 })).toBe(3);
    expect(rolloutSlots(caps, m, { ...shape, samples: 2 }, { memoryBudgetBytes: 2 ** 40 })).toBe(2);
    expect(() => rolloutSlots(caps, m, shape, { memoryBudgetBytes: 1000 })).toThrow(/gpu_memory_utilization/);
  });

  it(
    "one binding no longer bounds the slots: Qwen3-1.7B's 64 sequences of Unsloth's GRPO (prompt 256 + response " +
      '768, bf16 cache) decode at once under 128 MiB as under an unlimited binding',
    () => {
      const m = qwen3Of(2048, 28, 16, 8, 6144);
      const shape = { promptLength: 256, capacity: 1322, samples: 64, cacheDtype: 'bf16' as const, loraRank: 64 };
      const unlimited = { maxBufferSize: 2 ** 40, maxStorageBufferBindingSize: 2 ** 40 };
      // A bf16 cache layer is 1322 × 1,024 × 2 B = 2.6 MiB a sequence (49 in 128 MiB), a prefill's gate_up 256 ×
      // 12,288 × 4 B = 12 MiB (10): the slots were 10 before decode groups.
      expect(rolloutSlots(LAVAPIPE, m, shape, { memoryBudgetBytes: 16 * 2 ** 30 })).toBe(64);
      const items = rolloutMemory(2 ** 27, m, shape, 64).items;
      expect(items.find((i) => i.key === 'rollout decode cache')!.what).toMatch(/2 groups of 49/);
      expect(items.find((i) => i.key === 'rollout prefill buffers')!.what).toMatch(/^prefill activations .*\(10 of 64/);
      expect(rolloutMemory(2 ** 27, m, shape, 64).largest.bytes).toBeLessThanOrEqual(2 ** 27);
      // Where memory binds, the 128 MiB binding gives no fewer slots than an unlimited one (its groups' scratch and
      // prefill buffers are smaller), and as many as the budget holds.
      for (const budget of [2 ** 30, 3 * 2 ** 30, 6 * 2 ** 30]) {
        const bound = rolloutSlots(LAVAPIPE, m, { ...shape, samples: 10_000 }, { memoryBudgetBytes: budget });
        expect(bound).toBeGreaterThanOrEqual(
          rolloutSlots(unlimited, m, { ...shape, samples: 10_000 }, { memoryBudgetBytes: budget }),
        );
        const bytes = (S: number) => rolloutMemory(2 ** 27, m, shape, S).items.reduce((n, i) => n + i.bytes, 0);
        expect(bytes(bound)).toBeLessThanOrEqual(budget);
        expect(bytes(bound + 1)).toBeGreaterThan(budget);
      }
    },
  );

  it(
    "plans the validation that overran lavapipe's binding: 1,319 GSM8K prompts of 211 tokens, 1,024-token " +
      'responses, Qwen3 vocabulary',
    () => {
      const shape = { promptLength: 211, capacity: 211 + 1024 + 17 + 313, samples: 1319 };
      for (const m of [qwen3(128, 2, 1, 384, 151_936), qwen3(1024, 16, 8, 3072, 151_936)]) {
        const slots = rolloutSlots(LAVAPIPE, m, shape, { memoryBudgetBytes: 0.5 * 2 ** 32 });
        expect(slots).toBeGreaterThan(0);
        expect(slots).toBeLessThan(1319);
        // Every tensor bound whole fits: a decode group's cache layer, a prefill group's activations, the logits.
        expect(rolloutMemory(LAVAPIPE.maxStorageBufferBindingSize, m, shape, slots).largest.bytes).toBeLessThanOrEqual(
          LAVAPIPE.maxStorageBufferBindingSize,
        );
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
    const bf16 = rolloutSlots(caps, m, { ...shape, cacheDtype: 'bf16' }, budget);
    // Per slot in float32: the caches' (57 layers of k or v) × (1,041 + 256) slots × 1,024 × 4 B = 303 MB of 339 MB
    // (the prefill's activations are 36 MB); in bf16 the caches take half that, plus a 2 MB float32 copy of one
    // prefill layer: 190 MB, 1.79 times the slots.
    expect(bf16 / f32).toBeGreaterThan(1.75);
    expect(bf16 / f32).toBeLessThan(2);
    // Multi-turn prompts and observations go into the decode cache itself: no prefill decoder, but a float32 copy of
    // one cache layer that they attend through.
    const multiTurn = rolloutMemory(2 ** 40, m, { ...shape, cacheDtype: 'bf16', blockTokens: 256 }, bf16);
    expect(multiTurn.items.map((i) => i.key)).toEqual(['rollout decode cache', 'rollout decode buffers']);
  });
});
