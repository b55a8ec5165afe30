// Chunked prefill: an engine that pretends to bind at most 128 KiB (WEBGPU_MAX_BINDING_BYTES) cannot bind the
// (tokens, 2I) gate/up activation of one 150-token prompt (225 KiB), so the rollout feeds each prompt in calls of at
// most 85 tokens, each extending the KV cache the calls before it wrote (ppo/generation/decoders.ts feedBlock). It
// must give what the unsplit engine gives, bit for bit: the same KV cache and last-token logits after a prefill, and
// the same tokens and old log-probs from the same seed — for continuous batching (refills prefilled on their own), a
// bfloat16 cache, and multi-turn rollouts (prompts and observations fed through the same path). Every call of both
// engines has more than 32 rows, so both take the same matmul and attention kernels (feedBlock says why). Where
// nothing is above a binding, the rollout records exactly the dispatches it did before chunking existed.
import { describe, it, expect, vi, afterAll, afterEach } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { randomPolicy } from '../support/random-policy.ts';
import { seededRandom } from '../support/arrays.ts';
import { Engine, readKnobs } from '../../engine/index.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { IncrementalDecoder, callTokens } from '../../models/incremental-decoder.ts';
import { positionsFromMask } from '../../models/token-batch.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import { RolloutDecoders } from '../../ppo/generation/decoders.ts';
import { rolloutMemory } from '../../ppo/generation/slots.ts';
import { continuousCacheCapacity } from '../../ppo/generation/continuous-batching.ts';
import type { RolloutConfig, TurnEnvironment } from '../../ppo/generation/types.ts';
import { ScriptedEnvironment } from '../support/scripted-environment.ts';

const SPLIT_BYTES = 128 * 1024;

function config(): DecoderConfig {
  return parseHfConfig({
    architectures: ['Qwen3ForCausalLM'],
    vocab_size: 61,
    hidden_size: 32,
    intermediate_size: 192,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: true,
  });
}

// Four prompt lengths, all longer than one call of the split engine (85 tokens), so every prefill is chunked: left
// padding exercised, and a short prompt's first call holds padding only.
const random = seededRandom(3);
const PROMPTS = [150, 97, 120, 141].map((n) => Array.from({ length: n }, () => 5 + Math.floor(random() * 56)));

const C: RolloutConfig = {
  n: 4,
  temperature: 0.9,
  topK: -1,
  topP: 0.95,
  seed: 11,
  maxResponseLength: 40,
  eosTokenIds: [4, 17, 30],
  padTokenId: 0,
  readEvery: 2,
};

/** Generates on `engine`; reports the calls that appended tokens without logits (chunks before a block's last). */
async function generate(
  engine: Engine,
  dtype: 'f32' | 'bf16',
  c: RolloutConfig,
  environment: TurnEnvironment | null = null,
  prompts: number[][] = PROMPTS,
): Promise<{ responses: number[][]; lengths: number[]; oldLogProbs: number[][]; appends: number; dispatches: number }> {
  const append = vi.spyOn(IncrementalDecoder.prototype, 'append');
  const generator = new RolloutGenerator(engine, randomPolicy(engine, config()), dtype);
  const before = engine.dispatchCount;
  const batch = await generator.generate(prompts, c, environment);
  const dispatches = engine.dispatchCount - before;
  generator.release();
  const appends = append.mock.calls.length;
  append.mockRestore();
  return {
    responses: batch.responses.map((r) => [...r]),
    lengths: [...batch.responseLengths],
    oldLogProbs: batch.oldLogProbs.map((r) => [...r]),
    appends,
    dispatches,
  };
}

describe('chunked prefill', () => {
  let split: Engine | null = null;
  const splitEngine = async () => (split ??= await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES }));
  afterAll(() => split?.destroy());
  afterEach(() => vi.restoreAllMocks());

  it('one call holds at most what a binding holds: 85 of a 150-token prompt under 128 KiB, all of it unsplit', () => {
    const c = config();
    // The widest activation is gate/up: 2I = 384 floats, 1,536 bytes a token.
    expect(callTokens(c, 150, 0, SPLIT_BYTES)).toBe(85);
    expect(callTokens(c, 150, 0, 2 ** 27)).toBe(150);
    // Before chunked prefill the plan refused this rollout (one sequence's widest activation of 150 tokens is
    // 230,400 bytes); now its prefill buffers are one call's.
    const shape = { promptLength: 150, capacity: continuousCacheCapacity(150, 40, 2), samples: 16 };
    const plan = rolloutMemory(SPLIT_BYTES, c, shape, 16);
    expect(plan.items.find((i) => i.key === 'rollout prefill buffers')!.what).toMatch(/1 of 16 .* in chunks of 85/);
    expect(plan.largest.bytes).toBeLessThanOrEqual(SPLIT_BYTES);
  });

  // 150 tokens go in as calls of 75 and 75, 97 as 48 and 49: never a call of a few tokens (85 + 12), which would take
  // the register matmul (32 rows or fewer) and, on GPUs, an attention kernel splitting keys differently.
  for (const [dtype, prompts, first] of [
    ['f32', PROMPTS, 75],
    ['bf16', PROMPTS, 75],
    ['f32', [PROMPTS[1]], 48],
    ['bf16', [PROMPTS[1]], 48],
  ] as const) {
    const width = Math.max(...prompts.map((p) => p.length));
    it(`a prefill of ${prompts.length} × ${width} tokens in two calls leaves the KV cache and last-token logits of one call, bit for bit (${dtype} cache)`, async () => {
      const prefill = async (engine: Engine) => {
        const decoders = new RolloutDecoders(engine, { ...randomPolicy(engine, config()), cacheDtype: dtype });
        const decoder = decoders.decoderFor('prefill', prompts.length, width, width);
        decoder.reset(prompts.length);
        const masks = prompts.map((p) => Array.from({ length: width }, (_, t) => (t >= width - p.length ? 1 : 0)));
        const append = vi.spyOn(decoder, 'append');
        const logits = await engine.read(
          decoders.feedBlock(
            decoder,
            prompts.map((p) => [...new Array<number>(width - p.length).fill(0), ...p]),
            masks,
            masks.map((m) => positionsFromMask(m)),
          ),
        );
        // Each row's cache, layer by layer, whichever group holds it.
        const rows: number[][] = [];
        for (const { group, rows: n } of decoder.cache.held()) {
          for (let l = 0; l < config().numLayers; l++) {
            for (const t of [group.k[l], group.v[l]]) {
              const values = await engine.read(t);
              const per = values.length / group.maxRows;
              for (let b = 0; b < n; b++)
                (rows[group.first + b] ??= []).push(...values.subarray(b * per, (b + 1) * per));
            }
          }
        }
        const calls = append.mock.calls.map(([input]) => input.T);
        decoders.destroy();
        return { logits: [...logits], rows, calls, groups: decoder.cache.held().length };
      };
      const whole = await prefill(await gpuEngine());
      const chunked = await prefill(await splitEngine());
      expect(whole.calls).toEqual([]);
      expect(chunked.calls).toEqual([first]);
      // Each row in a group of its own: one row's 85-token activation fills a binding.
      expect(chunked.groups).toBe(prompts.length);
      expect(chunked.rows).toEqual(whole.rows);
      expect(chunked.logits).toEqual(whole.logits);
    });
  }

  for (const dtype of ['f32', 'bf16'] as const) {
    for (const maxSlots of [16, 8]) {
      it(`continuous batching, ${dtype} cache, ${maxSlots} slots for 16 samples: prompts prefilled in chunks, the tokens and old log-probs of the unsplit rollout, bit for bit`, async () => {
        const c = { ...C, maxSlots };
        const expected = await generate(await gpuEngine(), dtype, c);
        const actual = await generate(await splitEngine(), dtype, c);
        expect(expected.appends).toBe(0);
        expect(actual.appends).toBeGreaterThanOrEqual(maxSlots === 16 ? 1 : 2);
        expect(new Set(expected.lengths).size).toBeGreaterThan(3);
        expect(actual.responses).toEqual(expected.responses);
        expect(actual.oldLogProbs).toEqual(expected.oldLogProbs);
      });
    }
  }

  it('multi-turn: prompts fed in chunks, the tokens and old log-probs of the unsplit rollout, bit for bit', async () => {
    // 6 samples: observation blocks of at most 5 tokens stay within the register kernel's 32 rows in both rollouts
    // (the split engine's are one row a group).
    const c = { ...C, n: 2, maxResponseLength: 16, eosTokenIds: [4], readEvery: 3 };
    const prompts = PROMPTS.slice(0, 3);
    const environment = new ScriptedEnvironment();
    const expected = await generate(await gpuEngine(), 'f32', c, environment, prompts);
    const actual = await generate(await splitEngine(), 'f32', c, new ScriptedEnvironment(), prompts);
    expect(expected.appends).toBe(0);
    expect(actual.appends).toBeGreaterThan(0);
    expect(environment.given).toBeGreaterThan(2);
    expect(actual.responses).toEqual(expected.responses);
    expect(actual.oldLogProbs).toEqual(expected.oldLogProbs);
  });

  it('where nothing is above a binding, a rollout records the dispatches it did before chunked prefill', async () => {
    // 64 KiB holds a whole 5-token prompt's activations (and the decode cache in 2 groups): no call is chunked.
    const small = await Engine.create({ ...readKnobs(), maxBindingBytes: 64 * 1024 });
    try {
      const prompts = [[5, 9, 12, 3, 40], [7], [33, 2, 18], [8, 8, 51, 6]];
      const c = { ...C, maxResponseLength: 12 };
      const whole = await generate(await gpuEngine(), 'f32', c, null, prompts);
      const grouped = await generate(small, 'f32', c, null, prompts);
      expect(whole.appends + grouped.appends).toBe(0);
      expect(grouped.responses).toEqual(whole.responses);
      // The same rollouts on main before chunked prefill (lavapipe): the unsplit engine's and the 64 KiB one's.
      const before = { cpu: [90, 137], gpu: [268, 315] }[small.caps.deviceClass];
      expect([whole.dispatches, grouped.dispatches]).toEqual(before);
    } finally {
      small.destroy();
    }
  });
});
