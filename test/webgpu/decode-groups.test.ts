// Decode groups: an engine that pretends to bind at most 16 KiB (WEBGPU_MAX_BINDING_BYTES) holds the rollout's KV
// cache in groups of a few rows and prefills a few prompts at a time, and must give what the unsplit engine gives,
// bit for bit — the same tokens and the same old log-probs from the same seed — for continuous batching (slots
// refilled, the cache shifted and compacted across groups), a bfloat16 cache, and multi-turn rollouts.
import { describe, it, expect, vi, afterAll } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { randomPolicy } from '../support/random-policy.ts';
import { Engine, readKnobs } from '../../engine/index.ts';
import { parseHfConfig, type DecoderConfig } from '../../models/hf-config.ts';
import { KvCache } from '../../models/kv-cache.ts';
import { IncrementalDecoder } from '../../models/incremental-decoder.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import { rolloutMemory } from '../../ppo/generation/slots.ts';
import { continuousCacheCapacity } from '../../ppo/generation/continuous-batching.ts';
import { parameterBytes } from '../../ppo/jobs/memory-plan.ts';
import { decodeAttention } from '../../kernels/decode/decode-attention.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import type { RolloutConfig, TurnEnvironment } from '../../ppo/generation/types.ts';
import { ScriptedEnvironment } from '../support/scripted-environment.ts';

const SPLIT_BYTES = 16 * 1024;

function config(vocabSize = 61): DecoderConfig {
  return parseHfConfig({
    architectures: ['Qwen3ForCausalLM'],
    vocab_size: vocabSize,
    hidden_size: 32,
    intermediate_size: 48,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: true,
  });
}

// Left padding exercised: four prompt lengths, 4 samples each. Matmul's kernel depends on its rows (at most 32: the
// register kernel, more: the tiled one; kernels/matmul/matmul.ts), and two kernels round differently: the shapes keep
// every prefill of both rollouts on the same side (16 or 8 prompts of 5 tokens whole, 8 a group, 1-2 for refills).
const PROMPTS = [[5, 9, 12, 3, 40], [7], [33, 2, 18], [8, 8, 51, 6]];

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

/** Generates on `engine` and reports the most decode groups any cache held at once. */
async function generate(
  engine: Engine,
  dtype: 'f32' | 'bf16',
  c: RolloutConfig,
  environment: TurnEnvironment | null = null,
  prompts: number[][] = PROMPTS,
  vocabSize?: number,
): Promise<{ responses: number[][]; lengths: number[]; oldLogProbs: number[][]; groups: number }> {
  const held = vi.spyOn(KvCache.prototype, 'held');
  const generator = new RolloutGenerator(engine, randomPolicy(engine, config(vocabSize)), dtype);
  const batch = await generator.generate(prompts, c, environment);
  generator.release();
  const groups = Math.max(...held.mock.results.map((r) => (r.value as unknown[]).length));
  held.mockRestore();
  return {
    responses: batch.responses.map((r) => [...r]),
    lengths: [...batch.responseLengths],
    oldLogProbs: batch.oldLogProbs.map((r) => [...r]),
    groups,
  };
}

describe('decode groups', () => {
  let split: Engine | null = null;
  afterAll(() => split?.destroy());

  for (const dtype of ['f32', 'bf16'] as const) {
    for (const maxSlots of [16, 8]) {
      it(`continuous batching, ${dtype} cache, ${maxSlots} slots for 16 samples: grouped under a 16 KiB binding, the tokens and old log-probs of the unsplit rollout, bit for bit`, async () => {
        const whole = await gpuEngine();
        split ??= await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES });
        const c = { ...C, maxSlots };
        const expected = await generate(whole, dtype, c);
        const actual = await generate(split, dtype, c);
        expect(expected.groups).toBe(1);
        // A cache layer row is 114 slots × 16 × 4 B (f32) or × 2 B (bf16): 2 or 4 rows a group.
        expect(actual.groups).toBe(maxSlots / (dtype === 'f32' ? 2 : 4));
        expect(new Set(expected.lengths).size).toBeGreaterThan(3);
        expect(actual.responses).toEqual(expected.responses);
        expect(actual.oldLogProbs).toEqual(expected.oldLogProbs);
      });
    }
  }

  it('multi-turn: grouped under a 16 KiB binding, the tokens and old log-probs of the unsplit rollout, bit for bit', async () => {
    const whole = await gpuEngine();
    split ??= await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES });
    // 6 samples: prompts and observation blocks of at most 8 tokens (max(P, R)) take groups of 5 rows, so every
    // block stays within the register kernel's 32 rows in both rollouts.
    const c = { ...C, n: 2, maxResponseLength: 8, eosTokenIds: [4], readEvery: 3 };
    const prompts = PROMPTS.slice(0, 3);
    const expected = await generate(whole, 'f32', c, new ScriptedEnvironment(), prompts);
    const actual = await generate(split, 'f32', c, new ScriptedEnvironment(), prompts);
    expect(expected.groups).toBe(1);
    expect(actual.groups).toBe(2);
    expect(new Set(expected.lengths).size).toBeGreaterThan(2);
    expect(actual.responses).toEqual(expected.responses);
    expect(actual.oldLogProbs).toEqual(expected.oldLogProbs);
  });

  // On lavapipe: planned 411,104 B (the decoders' 375,712 and the bf16 copy), allocated 410,816 B (the groups' copies
  // are counted whether or not a group's rows start aligned).
  it("the plan's items are what a grouped rollout's decoders allocate (bf16 cache, 16 KiB binding)", async () => {
    split ??= await Engine.create({ ...readKnobs(), maxBindingBytes: SPLIT_BYTES });
    const engine = split;
    // The rollout allocates its bf16 copy of the weights (never transposed) and its decoders, as the plan's rollout
    // phase counts them under free_cache_engine.
    const generator = new RolloutGenerator(engine, randomPolicy(engine, config()), 'bf16');
    const before = engine.allocatedBytes;
    await generator.generate(PROMPTS, { ...C, maxSlots: 16 });
    await engine.sync();
    const allocated = engine.allocatedBytes - before;
    generator.release();
    const shape = {
      promptLength: 5,
      capacity: continuousCacheCapacity(5, C.maxResponseLength, C.readEvery!),
      samples: 16,
      cacheDtype: 'bf16' as const,
    };
    const planned = rolloutMemory(SPLIT_BYTES, config(), shape, 16);
    expect(planned.items.find((i) => i.key === 'rollout decode cache')!.what).toMatch(/4 groups of 4/);
    const plannedBytes = planned.items.reduce((n, i) => n + i.bytes, parameterBytes(config(), 'bf16'));
    console.log(`grouped rollout: planned ${plannedBytes} B, allocated ${allocated} B`);
    expect(plannedBytes).toBeGreaterThanOrEqual(allocated);
    expect(plannedBytes).toBeLessThanOrEqual(1.02 * allocated);
  });

  // Logits windows: with a 200-token vocabulary, 80 rows of logits are 64,000 bytes, above a 32 KiB binding, so a
  // decode step's logits (and the prefill's, gathered from its groups) come in two windows of 40 rows (32,768 / 800),
  // each a buffer of its own; the LM head, the sampler and the log-prob of its token run window by window. Before
  // windows the slots were capped at 40. 80 rows (the widest activation, 96 floats, allows 85) and compaction to at
  // most 40 keep every LM head of both rollouts on one side of the register kernel's 32 rows (kernels/matmul).
  it('logits windows: 80 rows decode at once under a 32 KiB binding (40 rows of logits a binding), the tokens and old log-probs of the unsplit rollout, bit for bit', async () => {
    const whole = await gpuEngine();
    const windowed = await Engine.create({ ...readKnobs(), maxBindingBytes: 32 * 1024 });
    const V = 200;
    // Prompts of 1-2 tokens: the prefill's groups (32,768 / (2 tokens × 96 floats × 4 bytes) = 40 rows) take the
    // tiled LM head as the whole batch's 80 rows do.
    const prompts = Array.from({ length: 20 }, (_, i) =>
      [(11 + 13 * i) % V, (5 + 7 * i) % V].slice(i % 3 === 0 ? 1 : 0),
    );
    const c = { ...C, maxResponseLength: 12, eosTokenIds: [4, 17, 30, 101, 150] };
    const run = async (engine: Engine) => {
      const dispatch = vi.spyOn(engine, 'dispatch');
      const extend = vi.spyOn(IncrementalDecoder.prototype, 'extend');
      const result = await generate(engine, 'f32', c, null, prompts, V);
      const samplers = dispatch.mock.calls.filter(([spec]) => spec.name.startsWith('sample/')).length;
      const steps = extend.mock.calls.filter(([input]) => input.T === 1);
      dispatch.mockRestore();
      extend.mockRestore();
      const rows = Math.max(...steps.map(([input]) => input.ids.size));
      return { ...result, samplers, decodeSteps: steps.length, rows };
    };
    try {
      const expected = await run(whole);
      const actual = await run(windowed);
      expect([expected.rows, actual.rows]).toEqual([80, 80]);
      // One sampler dispatch a step where the logits fit one binding; two while more than 40 rows decode.
      expect(expected.samplers).toBe(expected.decodeSteps + 1);
      expect(actual.decodeSteps).toBe(expected.decodeSteps);
      expect(actual.samplers).toBeGreaterThan(actual.decodeSteps + 1);
      expect(new Set(expected.lengths).size).toBeGreaterThan(3);
      expect(actual.responses).toEqual(expected.responses);
      expect(actual.oldLogProbs).toEqual(expected.oldLogProbs);
    } finally {
      windowed.destroy();
    }
  });

  // Multi-turn's decoder holds the prompts and observation blocks too (calls of up to max(P, R) tokens), in groups of
  // 14 rows here (32,768 / (6 tokens × 96 floats × 4 bytes)), while its decode steps take the 80 rows at once, their
  // logits in two windows. On CPU devices a group's call takes matmul's register kernel (32 rows and fewer) where the
  // whole batch's takes the tiled one: the same tokens, log-probs equal to rounding. The GPU class's kernels do not
  // switch: bit for bit.
  it('logits windows, multi-turn: 80 rows under a 32 KiB binding, the tokens of the unsplit rollout (GPU class: and its log-probs, bit for bit)', async () => {
    const whole = await gpuEngine();
    const windowed = await Engine.create({ ...readKnobs(), maxBindingBytes: 32 * 1024 });
    const V = 200;
    const prompts = Array.from({ length: 40 }, (_, i) =>
      [(11 + 13 * i) % V, (5 + 7 * i) % V].slice(i % 3 === 0 ? 1 : 0),
    );
    const c = { ...C, n: 2, maxResponseLength: 6, eosTokenIds: [4], readEvery: 3 };
    const run = async (engine: Engine) => {
      const dispatch = vi.spyOn(engine, 'dispatch');
      const extend = vi.spyOn(IncrementalDecoder.prototype, 'extend');
      const result = await generate(engine, 'f32', c, new ScriptedEnvironment(), prompts, V);
      const samplers = dispatch.mock.calls.filter(([spec]) => spec.name.startsWith('sample/')).length;
      const rows = Math.max(...extend.mock.calls.filter(([input]) => input.T === 1).map(([input]) => input.ids.size));
      dispatch.mockRestore();
      extend.mockRestore();
      return { ...result, samplers, rows };
    };
    try {
      const expected = await run(whole);
      const actual = await run(windowed);
      expect([expected.rows, actual.rows]).toEqual([80, 80]);
      expect(actual.samplers).toBeGreaterThan(expected.samplers);
      expect([expected.groups, actual.groups]).toEqual([1, 6]);
      expect(new Set(expected.lengths).size).toBeGreaterThan(2);
      expect(actual.responses).toEqual(expected.responses);
      if (windowed.caps.deviceClass === 'gpu') expect(actual.oldLogProbs).toEqual(expected.oldLogProbs);
      else expectClose(actual.oldLogProbs.flat(), expected.oldLogProbs.flat(), 1e-5, 1e-5, 'old log-probs');
    } finally {
      windowed.destroy();
    }
  });

  // The GPUs' decode attention splits a long cache over workgroups, fewer splits the more rows there are (a quarter of
  // the batch would take 3 splits of its 600 slots where the whole takes 2): a group passes its batch's rows.
  it("a decode group's attention splits the cache as its whole batch's does (the GPUs' split variant)", async () => {
    const engine = await gpuEngine();
    const [B, NH, NKV, HS, capacity, slot] = [64, 16, 8, 16, 600, 599];
    const W = (NH + 2 * NKV) * HS;
    const kvWidth = NKV * HS;
    const qkv = engine.tensorFrom('qkv', [B, W], randomArray(B * W, 1));
    const k = randomArray(B * capacity * kvWidth, 2);
    const v = randomArray(B * capacity * kvWidth, 3);
    const keyMask = engine.tensorFrom('mask', [B * capacity], new Array<number>(B * capacity).fill(1), 'u32');
    const run = async (groups: number, splitRows: boolean): Promise<Float32Array> => {
      const rows = B / groups;
      const out = engine.tensor('out', [B, NH * HS]);
      for (let g = 0; g < groups; g++) {
        const part = (t: Float32Array) =>
          t.subarray(g * rows * capacity * kvWidth, (g + 1) * rows * capacity * kvWidth);
        decodeAttention(engine, {
          qkv: qkv.view('qkv[g]', g * rows * W, [rows, W]),
          kCache: engine.tensorFrom('k', [rows * capacity * kvWidth], part(k)),
          vCache: engine.tensorFrom('v', [rows * capacity * kvWidth], part(v)),
          keyMask: keyMask.view('mask[g]', g * rows * capacity, [rows * capacity]),
          out: out.view('out[g]', g * rows * NH * HS, [rows, NH * HS]),
          B: rows,
          NH,
          NKV,
          HS,
          capacity,
          slot,
          maskBatchStride: capacity,
          scale: 0.25,
          ...(splitRows ? { splitRows: B } : {}),
        });
      }
      return engine.read(out);
    };
    engine.knobs.kernelVariants['decode-attention'] = 'split';
    try {
      const whole = await run(1, false);
      expect(await run(4, true)).toEqual(whole);
      expect(await run(4, false)).not.toEqual(whole);
    } finally {
      delete engine.knobs.kernelVariants['decode-attention'];
    }
  });
});
