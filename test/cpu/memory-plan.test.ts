// The memory plan: resident parameters, gradients and AdamW moments per model, a phase per stage of the step,
// and what does not fit named with the key (and value) that makes it fit — taking the advice removes the problem.
import { describe, it, expect } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadConfig } from '../../ppo/config.ts';
import { parseHfConfig, withHead } from '../../models/hf-config.ts';
import { parameterEntries } from '../../models/parameter-layout.ts';
import { planMemory, parameterCount, parameterBytes, formatMemoryPlan } from '../../ppo/jobs/memory-plan.ts';
import { deviceMemorySize } from '../../engine/device-memory.ts';
import type { Engine } from '../../engine/index.ts';
import { memoryPlanOfCheckpoint } from '../../tools/bench/memory.ts';
import { makeTempDir } from '../support/temp-dir.ts';
import { rolloutMemory } from '../../ppo/generation/slots.ts';
import { continuousCacheCapacity } from '../../ppo/generation/continuous-batching.ts';
import { DEFAULT_READ_EVERY } from '../../ppo/generation/types.ts';

const QWEN3_SMALL = {
  architectures: ['Qwen3ForCausalLM'],
  vocab_size: 151936,
  hidden_size: 128,
  intermediate_size: 384,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 32,
  tie_word_embeddings: true,
};
const actor = parseHfConfig(QWEN3_SMALL);
const critic = withHead(actor, 'token-classification');
const MIB = 2 ** 20;
/** The arena starts each tensor at a multiple of 256 B (engine/arena.ts), and the plan counts what it allocates: each
 *  layer's q_norm and k_norm (32 floats, 128 B) take 256 B, the critic's score bias (1 float) 256 B. */
const NORM_PADDING = actor.numLayers * 2 * 128;
const BIAS_PADDING = 256 - 4;
const GIB = 2 ** 30;
/** A device of `bytes` as WEBGPU_DEVICE_MEMORY sets it. */
const overrideMemory = (bytes: number) =>
  deviceMemorySize({ description: 'test adapter', software: false }, bytes, null);
/** The device size these plans were written for (the rollout's budget 0.5 × 4 GiB). */
const FOUR_GIB = overrideMemory(4 * GIB);

/** Without gradient checkpointing the updates keep every layer's activations: the peak is the actor update's. */
const EVERY_LAYER = [
  'actor_rollout_ref.model.enable_gradient_checkpointing=false',
  'critic.model.enable_gradient_checkpointing=false',
];

function config(overrides: string[]) {
  return loadConfig({
    overrides: [
      'actor_rollout_ref.model.path=/m',
      'algorithm.adv_estimator=gae',
      'data.train_batch_size=16',
      'actor_rollout_ref.actor.ppo_mini_batch_size=8',
      'data.max_prompt_length=256',
      'data.max_response_length=768',
      ...overrides,
    ],
  });
}

/** Double-quantized NF4 bytes of these matrices as the arena allocates them: 4 bits a weight; then the scales, 1 byte
 *  per 64 weights (the 8-bit scale) in whole u32 words, 8 bytes per 16,384 (absmax₂ and offset) and the 1 KiB map,
 *  rounded up to 256 B per tensor. */
function nestedNf4Bytes(matrices: { shape: readonly number[] }[]): number {
  return matrices.reduce((n, { shape: [rows, cols] }) => {
    const count = rows * cols;
    const scales = 1024 + 4 * Math.ceil(count / 256) + 8 * Math.ceil(count / 16384);
    return n + count / 2 + Math.ceil(scales / 256) * 256;
  }, 0);
}

describe('memory plan', () => {
  it("AdamW8bit counts bitsandbytes' state: a byte per moment and value plus 4 per 256, float32 under 4,096", () => {
    const optimizer = ['actor_rollout_ref.actor', 'critic'].flatMap((role) => [
      `${role}.optim.optimizer=AdamW8bit`,
      `${role}.optim.optimizer_impl=bitsandbytes.optim`,
    ]);
    const resident = (overrides: string[]) =>
      planMemory(
        config(overrides),
        { actor, critic, rewardModel: null },
        { maxBindingBytes: 128 * MIB, memory: FOUR_GIB },
      ).resident;
    const eightBit = resident(optimizer);
    expect(eightBit.map((r) => r.what)).toContain('actor AdamW8bit moments');
    expect(eightBit.map((r) => r.what)).toContain('critic AdamW8bit moments');
    // Per tensor of n values: n ≥ 4096 → 2·(⌈n/4⌉ words + ⌈n/256⌉ scales)·4 bytes; else 2·4·n. The actor's tensors:
    // the tied embedding 151,936 × 128; per layer qkv 256 × 128, o 128 × 128, gate_up 768 × 128, down 128 × 384 (all
    // ≥ 4096) and two norms of 128, q/k norms of 32; the final norm of 128.
    const bytes8 = (n: number) => (n >= 4096 ? 2 * 4 * (Math.ceil(n / 4) + Math.ceil(n / 256)) : 2 * 4 * n);
    const layer = [256 * 128, 128 * 128, 768 * 128, 128 * 384, 128, 128, 32, 32].reduce((s, n) => s + bytes8(n), 0);
    const actorMoments = bytes8(151936 * 128) + 2 * layer + bytes8(128);
    expect(eightBit.find((r) => r.what === 'actor AdamW8bit moments')!.bytes).toBe(actorMoments);
    const plain = resident([]).find((r) => r.what === 'actor AdamW moments')!.bytes;
    expect(actorMoments / plain).toBeCloseTo(0.25 * (1 + 4 / 256), 2);
    const lora = resident([...optimizer, 'actor_rollout_ref.model.lora_rank=8']);
    expect(lora.map((r) => r.what)).toContain('actor adapter AdamW8bit moments');
  });

  it('optimizer_offload: the moments in host memory, one staging buffer of at most 32 MiB on the device', () => {
    const offload = [
      'actor_rollout_ref.actor.fsdp_config.optimizer_offload=true',
      'critic.model.fsdp_config.optimizer_offload=true',
    ];
    const plan = (overrides: string[], maxBindingBytes = 128 * MIB) =>
      planMemory(config(overrides), { actor, critic, rewardModel: null }, { maxBindingBytes, memory: FOUR_GIB });
    const resident = plan([]);
    const offloaded = plan(offload);
    const bytesOf = (items: { what: string; bytes: number }[], what: string) =>
      items.find((i) => i.what === what)?.bytes;
    for (const model of ['actor', 'critic']) {
      const moments = bytesOf(resident.resident, `${model} AdamW moments`)!;
      expect(bytesOf(offloaded.host, `${model} AdamW moments`)).toBe(moments);
      expect(bytesOf(offloaded.resident, `${model} AdamW moments`)).toBeUndefined();
      expect(bytesOf(offloaded.resident, `${model} AdamW offload staging`)).toBe(32 * MIB);
    }
    expect(resident.host).toEqual([]);
    const saving = ['actor', 'critic'].reduce(
      (sum, model) => sum + bytesOf(resident.resident, `${model} AdamW moments`)! - 32 * MIB,
      0,
    );
    expect(resident.residentBytes - offloaded.residentBytes).toBe(saving);
    expect(resident.peakBytes - offloaded.peakBytes).toBe(resident.residentBytes - offloaded.residentBytes);
    expect(formatMemoryPlan(offloaded).join('\n')).toMatch(/actor AdamW moments +0\.\d\d GiB in host memory/);
    // A device whose bindings are smaller binds the staging buffer whole: at most one binding.
    expect(bytesOf(plan(offload, 8 * MIB).resident, 'actor AdamW offload staging')).toBe(8 * MIB);
    // Moments smaller than the staging buffer (LoRA adapters): staging them all, each region 256-byte aligned.
    const lora = plan([...offload, 'actor_rollout_ref.model.lora_rank=8']);
    const adapterMoments = bytesOf(lora.host, 'actor adapter AdamW moments')!;
    const staging = bytesOf(lora.resident, 'actor adapter AdamW offload staging')!;
    expect(staging).toBeGreaterThanOrEqual(adapterMoments);
    expect(staging).toBeLessThan(adapterMoments * 1.1);
    expect(staging % 256).toBe(0);
  });

  it("optim.optimizer and optimizer_impl: verl's pairs, any other refused in one line naming the key", () => {
    expect(() => config(['critic.optim.optimizer=AdamW8bit'])).toThrow(
      /critic\.optim\.optimizer_impl=torch\.optim has no AdamW8bit here \(verl imports torch\.optim\.AdamW8bit\) — set critic\.optim\.optimizer_impl=bitsandbytes\.optim/,
    );
    expect(() => config(['actor_rollout_ref.actor.optim.optimizer_impl=bitsandbytes.optim'])).toThrow(
      /actor_rollout_ref\.actor\.optim\.optimizer_impl=bitsandbytes\.optim has no AdamW here .* set actor_rollout_ref\.actor\.optim\.optimizer_impl=torch\.optim/,
    );
    expect(() => config(['actor_rollout_ref.actor.optim.optimizer=Adam8bit'])).toThrow(
      /AdamW \| AdamW8bit|AdamW, AdamW8bit/,
    );
  });

  const STAGES = [
    'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4',
    'critic.forward_micro_batch_size_per_gpu=4',
    'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2',
    'critic.ppo_micro_batch_size_per_gpu=2',
  ];

  it('counts parameters, gradients and both AdamW moments of actor and critic, and one phase per stage', () => {
    const plan = planMemory(
      // The rollout's decoders kept through the updates (free_cache_engine=false): every phase holds the earlier ones'.
      config([...STAGES, 'actor_rollout_ref.rollout.free_cache_engine=false']),
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 128 * MIB, memory: FOUR_GIB },
    );
    const actorBytes = parameterCount(actor) * 4;
    expect(parameterCount(actor)).toBe(
      151936 * 128 + 2 * (128 * 256 + 128 * 128 + 3 * 384 * 128 + 2 * 128 + 2 * 32) + 128,
    );
    expect(plan.resident.map((r) => r.what)).toEqual([
      'actor parameters',
      'actor gradients',
      'actor AdamW moments',
      'critic parameters',
      'critic gradients',
      'critic AdamW moments',
    ]);
    expect(plan.resident[2].bytes).toBe(2 * actorBytes);
    // rollout.ts would decode all 16 sequences at once here (one binding and the budget hold them).
    expect(plan.phases.map((p) => p.phase)).toEqual([
      'rollout (16 of 16 sequences at once)',
      'old log-probs',
      'values',
      'critic update',
      'actor update',
    ]);
    expect(plan.peakBytes).toBe(Math.max(...plan.phases.map((p) => p.peakBytes)));
    // The decode cache: 16 sequences × 1,302 slots (continuousCacheCapacity: prompt 256 + response 768 + 2·8 + 1
    // slots the host reads lag, plus a quarter of that, 261, to decode between two shifts) × 2 layers × (K, V) × 64
    // floats, one layer's compaction scratch, and the key mask (a word a slot).
    expect(plan.phases[0].items[0].bytes).toBe(((2 * 2 + 1) * 64 + 1) * 16 * 1302 * 4);
    // Each phase's buffers stay allocated into the later phases (GrowingBuffers only grow): the actor update's peak
    // holds every earlier phase's, with the LM head's 32 MiB logits scratch once (the old log-probs' 4 × 1,024 rows ×
    // 2,048 vocabulary rows and the update's 2 × 1,024 × 4,096 are the same size, one scratch tensor).
    // The actor's LM-head statistics of the old log-probs (4 × 1,024 tokens) outgrow the update's (2 × 1,024).
    const [rollout, old, values, criticUpdate, actorUpdate] = plan.phases;
    expect(old.items[1].bytes).toBe(actorUpdate.items[1].bytes);
    expect(actorUpdate.keptBytes).toBe(
      rollout.bytes +
        old.items[0].bytes +
        old.items[2].bytes -
        actorUpdate.items[2].bytes +
        values.bytes +
        criticUpdate.bytes,
    );
    expect(actorUpdate.peakBytes).toBe(plan.residentBytes + actorUpdate.keptBytes + actorUpdate.bytes);
    expect(plan.problems).toEqual([]);
    expect(formatMemoryPlan(plan).join('\n')).toMatch(
      /actor update .* peak .* GiB; largest tensor 6\.0 MiB \(widest activation\)/,
    );
  });

  it("free_cache_engine: the rollout's decoders and half copy out of the updates, a later rollout on what they keep", () => {
    const device = { maxBindingBytes: 128 * MIB, memory: FOUR_GIB };
    const models = { actor, critic, rewardModel: null };
    const keys = [...STAGES, 'actor_rollout_ref.rollout.dtype=bfloat16'];
    const kept = planMemory(config([...keys, 'actor_rollout_ref.rollout.free_cache_engine=false']), models, device);
    const freed = planMemory(config(keys), models, device);
    const copy = 'rollout copy of the actor (bf16 matrices)';
    const copyBytes = parameterBytes(actor, 'bf16');
    expect(kept.resident.map((r) => r.what)).toContain(copy);
    expect(freed.resident.map((r) => r.what)).not.toContain(copy);
    expect(freed.residentBytes).toBe(kept.residentBytes - copyBytes);
    expect(freed.phases.map((p) => p.phase)).toEqual([
      'rollout (16 of 16 sequences at once)',
      'old log-probs',
      'values',
      'critic update',
      'actor update',
      'rollout after an update (16 of 16 sequences at once)',
    ]);
    const [rollout, old, values, criticUpdate, actorUpdate, later] = freed.phases;
    expect(rollout.items[0]).toEqual({ what: copy, bytes: copyBytes, key: 'rollout copy' });
    expect(later.items).toEqual(rollout.items);
    // The old log-probs hold only the rollout's per-sequence buffers; the actor update no decoder.
    const perSequence = rollout.items.find((i) => i.key === 'per-sequence buffers')!.bytes;
    expect(old.keptBytes).toBe(perSequence);
    const decoders = rollout.bytes - copyBytes - perSequence;
    expect(actorUpdate.keptBytes).toBe(kept.phases[4].keptBytes - decoders);
    // The later rollout holds what the phases keep beyond their trunks' activations (the LM head's scratch and
    // statistics, the critic's head buffers), not the copy or decoders, which it allocates again.
    const trunks = [old, values, criticUpdate, actorUpdate].map((p) => p.items[0].bytes).reduce((a, b) => a + b, 0);
    expect(later.keptBytes).toBe(actorUpdate.keptBytes + actorUpdate.bytes - trunks - perSequence);
    expect(freed.peakBytes).toBeLessThan(kept.peakBytes);
    // A full fine-tune's copy changes with every update: never kept.
    expect(freed.keepsRolloutCopy).toBe(false);
  });

  it('free_cache_engine keeps the bf16 copy of a frozen LoRA base where memory allows, and frees it where not', () => {
    const keys = [
      'algorithm.adv_estimator=grpo',
      'actor_rollout_ref.model.lora_rank=8',
      'actor_rollout_ref.rollout.dtype=bfloat16',
    ];
    const device = (mib: number) => ({ maxBindingBytes: 128 * MIB, memory: overrideMemory(mib * MIB) });
    const models = { actor, critic: null, rewardModel: null };
    const copyBytes = parameterBytes(actor, 'bf16');
    const roomy = planMemory(config(keys), models, device(4096));
    expect(roomy.keepsRolloutCopy).toBe(true);
    expect(roomy.resident).toContainEqual({
      what: 'rollout copy of the actor (bf16 matrices), kept: its base is frozen',
      bytes: copyBytes,
    });
    expect(roomy.phases[0].items.map((i) => i.key)).not.toContain('rollout copy');
    // 600 MiB: the actor update is the peak (619 MiB with the copy kept, 581 without): freed with the decoders.
    const tight = planMemory(config(keys), models, device(600));
    expect(tight.keepsRolloutCopy).toBe(false);
    expect(tight.phases[0].items[0]).toEqual({
      what: 'rollout copy of the actor (bf16 matrices)',
      bytes: copyBytes,
      key: 'rollout copy',
    });
    expect(roomy.peakBytes - tight.peakBytes).toBe(copyBytes);
    expect(tight.peakBytes).toBeLessThanOrEqual(600 * MIB);
    expect(tight.problems).toEqual([]);
    // Without free_cache_engine it is resident, as every copy is.
    const never = planMemory(
      config([...keys, 'actor_rollout_ref.rollout.free_cache_engine=false']),
      models,
      device(600),
    );
    expect(never.keepsRolloutCopy).toBe(true);
    expect(never.resident).toContainEqual({ what: 'rollout copy of the actor (bf16 matrices)', bytes: copyBytes });
  });

  it(
    "counts frozen models in the dtype they are stored in: a bf16 checkpoint's reference and frozen critic in bf16, " +
      'fp32 when asked',
    () => {
      const bf16Actor = parseHfConfig({
        architectures: ['Qwen3ForCausalLM'],
        vocab_size: 151936,
        hidden_size: 128,
        intermediate_size: 384,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        head_dim: 32,
        tie_word_embeddings: true,
        torch_dtype: 'bfloat16',
      });
      const models = { actor: bf16Actor, critic: withHead(bf16Actor, 'token-classification'), rewardModel: null };
      const device = { maxBindingBytes: 128 * MIB, memory: FOUR_GIB };
      const resident = (overrides: string[]) =>
        new Map(
          planMemory(
            config(['actor_rollout_ref.actor.use_kl_loss=true', 'critic.freeze=true', ...overrides]),
            models,
            device,
          ).resident.map((r) => [r.what, r.bytes]),
        );
      // Matrices in 2 bytes, the norms (2 layers × (2·128 + 2·32) + 128 floats) in 4.
      const norms = 2 * (2 * 128 + 2 * 32) + 128;
      const halfBytes = (parameterCount(bf16Actor) - norms) * 2 + norms * 4 + NORM_PADDING;
      expect(parameterBytes(bf16Actor, 'bf16')).toBe(halfBytes);
      const byDefault = resident([]);
      expect(byDefault.get('actor parameters')).toBe(parameterCount(bf16Actor) * 4 + NORM_PADDING);
      expect(byDefault.get('reference parameters (bf16 matrices)')).toBe(halfBytes);
      expect(byDefault.get('critic parameters (bf16 matrices)')).toBe(parameterBytes(models.critic, 'bf16'));
      const asked = resident([
        'actor_rollout_ref.ref.fsdp_config.model_dtype=fp32',
        'critic.model.fsdp_config.model_dtype=fp16',
      ]);
      expect(asked.get('reference parameters')).toBe(parameterCount(bf16Actor) * 4 + NORM_PADDING);
      expect(asked.get('critic parameters (f16 matrices)')).toBe(parameterBytes(models.critic, 'f16'));
      // A critic that trains keeps float32 whatever its model_dtype.
      const trained = new Map(
        planMemory(config(['critic.model.fsdp_config.model_dtype=bf16']), models, device).resident.map((r) => [
          r.what,
          r.bytes,
        ]),
      );
      expect(trained.get('critic parameters')).toBe(parameterCount(models.critic) * 4 + NORM_PADDING + BIAS_PADDING);
    },
  );

  it(
    'keeps the transposed layer weights of the actor and a trained critic resident where training forwards use them ' +
      '(CPU devices)',
    () => {
      const device = { maxBindingBytes: 128 * MIB, memory: FOUR_GIB };
      const plain = planMemory(config([]), { actor, critic, rewardModel: null }, device);
      const transposed = planMemory(
        config([]),
        { actor, critic, rewardModel: null },
        { ...device, transposedWeights: true },
      );
      const layerWeights = 2 * (128 * 256 + 128 * 128 + 3 * 384 * 128) * 4;
      expect(transposed.residentBytes - plain.residentBytes).toBe(2 * layerWeights);
      transposed.phases.forEach((p, i) => expect(p.bytes, p.phase).toBe(plain.phases[i].bytes));
      // A frozen critic runs no training forward.
      const frozen = planMemory(
        config(['critic.freeze=true']),
        { actor, critic, rewardModel: null },
        { ...device, transposedWeights: true },
      );
      expect(frozen.resident.find((r) => r.what.startsWith('critic layer weights transposed'))).toBeUndefined();
    },
  );

  it("keeps the actor's weights transposed for decode steps resident where the rollout uses them (CPU devices)", () => {
    const overrides = config([]);
    const plain = planMemory(
      overrides,
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 128 * MIB, memory: FOUR_GIB },
    );
    const decoded = planMemory(
      overrides,
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 128 * MIB, memory: FOUR_GIB, decodeTransposedWeights: true },
    );
    // The layer weights; not the LM head: 151,936 × 128 is above the 4M elements decode steps transpose.
    const copies = 2 * (128 * 256 + 128 * 128 + 3 * 384 * 128) * 4;
    expect(decoded.resident.find((r) => r.what === 'actor weights transposed for decode steps')?.bytes).toBe(copies);
    expect(decoded.residentBytes - plain.residentBytes).toBe(copies);
    // With the training forward's copies too, the actor's training forwards share the decode set; the critic's are its
    // own.
    const both = planMemory(
      overrides,
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 128 * MIB, memory: FOUR_GIB, transposedWeights: true, decodeTransposedWeights: true },
    );
    expect(both.residentBytes - plain.residentBytes).toBe(2 * copies);
    expect(both.resident.find((r) => r.what === 'critic layer weights transposed (training forward)')?.bytes).toBe(
      copies,
    );
  });

  it("LoRA: adapter gradients and moments instead of the whole actor's, and no reference copy", () => {
    const device = { maxBindingBytes: 128 * MIB, memory: FOUR_GIB };
    const plan = planMemory(
      config([
        'actor_rollout_ref.model.lora_rank=8',
        'actor_rollout_ref.model.target_modules=[q_proj,v_proj]',
        'actor_rollout_ref.actor.use_kl_loss=true',
      ]),
      { actor, critic, rewardModel: null },
      device,
    );
    // Per layer: stacked A [16, 128] and block Bᵀ [16, qkv 256] for q and v.
    const adapterBytes = 2 * (16 * 128 + 16 * 256) * 4;
    expect(plan.resident.slice(0, 4)).toEqual([
      { what: 'actor parameters', bytes: parameterCount(actor) * 4 + NORM_PADDING },
      { what: 'actor LoRA adapters (r=8)', bytes: adapterBytes },
      { what: 'actor adapter gradients', bytes: adapterBytes },
      { what: 'actor adapter AdamW moments', bytes: 2 * adapterBytes },
    ]);
    const full = planMemory(
      config(['actor_rollout_ref.actor.use_kl_loss=true']),
      { actor, critic, rewardModel: null },
      device,
    );
    expect(full.resident.map((r) => r.what)).toContain('reference parameters');
    // The reference, gradients and two moments of the whole actor (the reference's and gradients' arenas padded as
    // the parameters').
    expect(full.residentBytes - plan.residentBytes).toBe(
      4 * parameterCount(actor) * 4 + 2 * NORM_PADDING - 4 * adapterBytes,
    );
  });

  it("critic LoRA: the critic's adapters + score (modules_to_save) train, its base in the checkpoint's dtype", () => {
    const device = { maxBindingBytes: 128 * MIB, memory: FOUR_GIB };
    const lora = ['critic.model.lora_rank=8', 'critic.model.target_modules=[q_proj,v_proj]'];
    const plan = planMemory(config(lora), { actor, critic, rewardModel: null }, device);
    // As the actor's case: stacked A [16, 128] and block Bᵀ [16, 256] per layer, then score.weight and score.bias.
    const trainedBytes = (2 * (16 * 128 + 16 * 256) + critic.hiddenSize + 1) * 4;
    const criticItems = plan.resident.filter((r) => r.what.startsWith('critic'));
    expect(criticItems).toEqual([
      { what: 'critic parameters', bytes: parameterCount(critic) * 4 + NORM_PADDING + BIAS_PADDING },
      { what: 'critic LoRA adapters (r=8) + score', bytes: trainedBytes },
      { what: 'critic adapter gradients', bytes: trainedBytes },
      { what: 'critic adapter AdamW moments', bytes: 2 * trainedBytes },
    ]);
    const full = planMemory(config([]), { actor, critic, rewardModel: null }, device);
    expect(full.residentBytes - plan.residentBytes).toBe(3 * parameterCount(critic) * 4 - 4 * trainedBytes);
    // A bf16 critic checkpoint: under LoRA its base stays bf16 (a fully trained critic is widened to float32).
    const bf16Critic = { ...critic, torchDtype: 'bfloat16' as const };
    const half = planMemory(config(lora), { actor, critic: bf16Critic, rewardModel: null }, device);
    const matrices = parameterCount(critic, (_, shape) => shape.length === 2) - critic.hiddenSize;
    expect(half.resident.find((r) => r.what.startsWith('critic parameters'))).toEqual({
      what: 'critic parameters (bf16 matrices)',
      bytes: parameterBytes(critic, 'bf16'),
    });
    expect(parameterBytes(critic, 'bf16')).toBe(
      2 * matrices + 4 * (parameterCount(critic) - matrices) + NORM_PADDING + BIAS_PADDING,
    );
  });

  it('LoRA on a bf16 checkpoint: the base (also the reference) in bf16, and no float32 transposed copies', () => {
    const bf16Actor = { ...actor, torchDtype: 'bfloat16' as const };
    const device = {
      maxBindingBytes: 128 * MIB,
      memory: FOUR_GIB,
      transposedWeights: true,
      decodeTransposedWeights: true,
    };
    const lora = ['actor_rollout_ref.model.lora_rank=8', 'actor_rollout_ref.actor.use_kl_loss=true'];
    const plan = planMemory(config(lora), { actor: bf16Actor, critic: null, rewardModel: null }, device);
    const matrices = parameterCount(actor, (_, shape) => shape.length === 2);
    const others = parameterCount(actor) - matrices;
    const bf16Bytes = 2 * matrices + 4 * others + NORM_PADDING;
    expect(plan.resident[0]).toEqual({ what: 'actor parameters (bf16 matrices)', bytes: bf16Bytes });
    expect(parameterBytes(actor, 'bf16')).toBe(bf16Bytes);
    expect(plan.resident.map((r) => r.what).filter((what) => what.includes('transposed'))).toEqual([]);
    // model_dtype=fp32 widens it again, and the CPU device's copies come back.
    const widened = planMemory(
      config([...lora, 'actor_rollout_ref.actor.fsdp_config.model_dtype=fp32']),
      { actor: bf16Actor, critic: null, rewardModel: null },
      device,
    );
    expect(widened.resident[0]).toEqual({ what: 'actor parameters', bytes: 4 * parameterCount(actor) + NORM_PADDING });
    expect(widened.resident.map((r) => r.what)).toContain('actor weights transposed for decode steps');
  });

  it('rollout.dtype=bfloat16: a bf16 copy of the actor, half the KV cache bytes a sequence, more sequences at once', () => {
    const device = { maxBindingBytes: 1024 * MIB, memory: overrideMemory(256 * MIB), decodeTransposedWeights: true };
    const models = { actor, critic, rewardModel: null };
    // A budget that bounds the slots: 128 sequences need more than the rollout's 128 MiB.
    const shape = ['data.train_batch_size=128', 'actor_rollout_ref.actor.ppo_mini_batch_size=64'];
    const kept = 'actor_rollout_ref.rollout.free_cache_engine=false';
    const f32 = planMemory(config([...shape, kept]), models, device);
    const bf16 = planMemory(config([...shape, kept, 'actor_rollout_ref.rollout.dtype=bfloat16']), models, device);
    expect(bf16.resident.find((r) => r.what === 'rollout copy of the actor (bf16 matrices)')?.bytes).toBe(
      parameterBytes(actor, 'bf16'),
    );
    // Decode steps multiply the half copy as stored: no float32 transposed set for them.
    expect(bf16.resident.map((r) => r.what)).not.toContain('actor weights transposed for decode steps');
    const at = (plan: typeof f32) => {
      const phase = plan.phases[0];
      const S = Number(/\((\d+) of/.exec(phase.phase)![1]);
      const cache = phase.items.find((i) => i.what.startsWith('KV cache'))!;
      const prefill = phase.items.find((i) => i.what.startsWith('prefill KV cache'))!;
      return { S, cache: cache.bytes / S, prefill: prefill.bytes / S, items: phase.items.map((i) => i.what) };
    };
    const [full, half] = [at(f32), at(bf16)];
    // k and v of 2 layers and a compaction layer, (768 + 256 + read-ahead) slots × NKV·HS = 64, and the u32 mask.
    const kv = (slots: number, bytes: number) => slots * (5 * 64 * bytes + 4);
    expect(full.cache).toBe(kv((full.cache / (5 * 64 * 4 + 4)) | 0, 4));
    expect(half.cache).toBe(kv(full.cache / (5 * 64 * 4 + 4), 2));
    expect(half.prefill).toBe(kv(256, 2));
    expect(half.items).toContain(`float32 copy of one bf16 prefill cache layer (${half.S} × 256 slots × K,V)`);
    // 27 → 33: prefill activations and the 152k-vocabulary logits, not the cache, fill most of a slot of this 2-layer
    // model (test/cpu/rollout-slots.test.ts has a 28-layer one, where the cache dominates).
    expect(full.S).toBeLessThan(128);
    expect(half.S).toBeGreaterThan(full.S);
  });

  it("gradient checkpointing: an update keeps every layer's input and one layer's activations", () => {
    const device = { maxBindingBytes: 128 * MIB, memory: FOUR_GIB };
    const update = (overrides: string[]) =>
      planMemory(config(overrides), { actor, critic, rewardModel: null }, device).phases.find(
        (p) => p.phase === 'actor update',
      )!.items[0];
    const all = update(EVERY_LAYER);
    const checkpointed = update([]);
    // 8 sequences of 1,024 tokens; a layer's activations are 4·C + 2 + (2·W + NH + NKV) + NH·HS + NH + 3·I floats
    // per token (W = 256, Qwen3's q/k norm), and checkpointing keeps one of the two layers plus the other's input.
    const perLayer = 4 * 128 + 2 + (2 * 256 + 4 + 2) + 128 + 4 + 3 * 384;
    expect(all.bytes - checkpointed.bytes).toBe(8 * 1024 * (perLayer - 128) * 4);
    expect(checkpointed.what).toMatch(/every layer's input and one layer's activations .*gradient checkpointing/);
  });

  it('fsdp_config.dtype=bfloat16: a bf16 compute copy of actor and critic, checkpointed layer inputs in bf16', () => {
    const device = { maxBindingBytes: 128 * MIB, memory: FOUR_GIB, transposedWeights: true };
    const models = { actor, critic, rewardModel: null };
    const f32 = planMemory(config([]), models, device);
    const bf16 = planMemory(
      config(['actor_rollout_ref.actor.fsdp_config.dtype=bfloat16', 'critic.model.fsdp_config.dtype=bfloat16']),
      models,
      device,
    );
    const resident = (plan: typeof f32, what: string) => plan.resident.find((r) => r.what === what)?.bytes;
    expect(resident(bf16, 'actor compute copy (bf16 matrices)')).toBe(parameterBytes(actor, 'bf16'));
    expect(resident(bf16, 'critic compute copy (bf16 matrices)')).toBe(parameterBytes(critic, 'bf16'));
    // The half copies are multiplied as stored: no float32 transposed set for the training forwards.
    expect(resident(f32, 'actor layer weights transposed (training forward)')).toBeGreaterThan(0);
    expect(resident(bf16, 'actor layer weights transposed (training forward)')).toBeUndefined();
    expect(resident(bf16, 'critic layer weights transposed (training forward)')).toBeUndefined();
    const update = (plan: typeof f32) => plan.phases.find((p) => p.phase === 'actor update')!.items[0];
    // 8 × 1,024 tokens, C = 128, 2 layers: float32 keeps layer 1's input (C floats) beside the shared set; bf16 keeps
    // both layers' inputs in bf16 (2·C halves), one float32 output before rounding (C) and a bf16 rounding scratch (C).
    expect(update(bf16).bytes - update(f32).bytes).toBe(8 * 1024 * (3 * 128 * 2 + 128 * 4 - 128 * 4));
    expect(update(bf16).what).toMatch(/every layer's input \(bf16\) and one layer's activations/);
    // With rollout.dtype=bfloat16 too, the rollout decodes from the compute copy: no second copy.
    const both = planMemory(
      config(['actor_rollout_ref.actor.fsdp_config.dtype=bfloat16', 'actor_rollout_ref.rollout.dtype=bfloat16']),
      models,
      device,
    );
    expect(resident(both, "actor compute copy (bf16 matrices), also the rollout's")).toBe(
      parameterBytes(actor, 'bf16'),
    );
    expect(both.resident.map((r) => r.what)).not.toContain('rollout copy of the actor (bf16 matrices)');
    // Log-prob forwards round their residual through one bf16 scratch.
    const forward = (plan: typeof f32) => plan.phases.find((p) => p.phase === 'old log-probs')!.items[0].bytes;
    expect(forward(bf16) - forward(f32)).toBe(16 * 1024 * 128 * 2);
  });

  it('load_in_4bit: the layer projections at 4.5 bits per weight, the embedding in the checkpoint dtype', () => {
    const bf16Actor = { ...actor, torchDtype: 'bfloat16' as const };
    const plan = planMemory(
      config(['actor_rollout_ref.model.lora_rank=8', 'actor_rollout_ref.model.load_in_4bit=true']),
      { actor: bf16Actor, critic: null, rewardModel: null },
      { maxBindingBytes: 128 * MIB, memory: FOUR_GIB, decodeTransposedWeights: true },
    );
    const layerMatrices = parameterCount(
      actor,
      (name, shape) => name.startsWith('model.layers.') && shape.length === 2,
    );
    const embedding = 151936 * 128;
    const norms = parameterCount(actor) - layerMatrices - embedding;
    expect(plan.resident[0]).toEqual({
      what: 'actor parameters (nf4 layer matrices, bf16 embedding)',
      bytes: layerMatrices * 0.5625 + 2 * embedding + 4 * norms + NORM_PADDING,
    });
    expect(plan.resident.map((r) => r.what).filter((what) => what.includes('transposed'))).toEqual([]);
  });

  it('use_bnb_nested_quant and load_in_8bit: the layer projections at their stored bytes, per tensor', () => {
    const bf16Actor = { ...actor, torchDtype: 'bfloat16' as const };
    const matrices = parameterEntries(actor).filter((e) => e.name.startsWith('model.layers.') && e.shape.length === 2);
    const layerMatrices = parameterCount(
      actor,
      (name, shape) => name.startsWith('model.layers.') && shape.length === 2,
    );
    const embedding = 151936 * 128;
    const rest = 2 * embedding + 4 * (parameterCount(actor) - layerMatrices - embedding) + NORM_PADDING;
    // int8: 1 byte a weight and a float32 per row.
    const nested = nestedNf4Bytes(matrices);
    const int8 = matrices.reduce((n, { shape: [rows, cols] }) => n + rows * cols + 4 * rows, 0);
    for (const [keys, what, bytes] of [
      [['load_in_4bit=true', 'use_bnb_nested_quant=true'], 'nf4-nested', nested],
      [['load_in_8bit=true'], 'int8', int8],
    ] as const) {
      const plan = planMemory(
        config(['actor_rollout_ref.model.lora_rank=8', ...keys.map((k) => `actor_rollout_ref.model.${k}`)]),
        { actor: bf16Actor, critic: null, rewardModel: null },
        { maxBindingBytes: 128 * MIB, memory: FOUR_GIB, decodeTransposedWeights: true },
      );
      expect(plan.resident[0]).toEqual({
        what: `actor parameters (${what} layer matrices, bf16 embedding)`,
        bytes: bytes + rest,
      });
    }
  });

  it('ref.load_in_4bit and reward_model.model.load_in_8bit: the separate reference and the reward model quantized', () => {
    const bf16Actor = { ...actor, torchDtype: 'bfloat16' as const };
    const rewardModel = { ...withHead(bf16Actor, 'sequence-classification'), padTokenId: 0 };
    const matrices = parameterEntries(actor).filter((e) => e.name.startsWith('model.layers.') && e.shape.length === 2);
    const layerMatrices = matrices.reduce((n, { shape: [rows, cols] }) => n + rows * cols, 0);
    const embedding = 151936 * 128;
    const norms = 4 * (parameterCount(actor) - layerMatrices - embedding) + NORM_PADDING;
    const plan = planMemory(
      config([
        'actor_rollout_ref.actor.use_kl_loss=true',
        'actor_rollout_ref.ref.load_in_4bit=true',
        'reward_model.enable=true',
        'reward_model.model.path=/rm',
        'reward_model.model.load_in_8bit=true',
      ]),
      { actor: bf16Actor, critic, rewardModel },
      { maxBindingBytes: 128 * MIB, memory: FOUR_GIB, decodeTransposedWeights: true },
    );
    const item = (what: string) => plan.resident.find((r) => r.what.startsWith(what));
    // The reference as the LoRA base under load_in_4bit: 4.5 bits a layer weight, the embedding in bf16.
    expect(item('reference parameters')).toEqual({
      what: 'reference parameters (nf4 layer matrices, bf16 embedding)',
      bytes: layerMatrices * 0.5625 + 2 * embedding + norms,
    });
    // int8: a byte a weight and a float32 per row; the score head (1 × 128) float32, the LM head absent.
    const rows = matrices.reduce((n, { shape: [r] }) => n + r, 0);
    expect(item('reward model parameters')).toEqual({
      what: 'reward model parameters (int8 layer matrices, bf16 embedding)',
      bytes: layerMatrices + 4 * rows + 2 * embedding + norms + 4 * 128,
    });
    // use_bnb_nested_quant on both: their layer projections as the double-quantized LoRA base's.
    const nested = planMemory(
      config([
        'actor_rollout_ref.actor.use_kl_loss=true',
        'actor_rollout_ref.ref.load_in_4bit=true',
        'actor_rollout_ref.ref.use_bnb_nested_quant=true',
        'reward_model.enable=true',
        'reward_model.model.path=/rm',
        'reward_model.model.load_in_4bit=true',
        'reward_model.model.use_bnb_nested_quant=true',
      ]),
      { actor: bf16Actor, critic, rewardModel },
      { maxBindingBytes: 128 * MIB, memory: FOUR_GIB, decodeTransposedWeights: true },
    );
    const nestedItem = (what: string) => nested.resident.find((r) => r.what.startsWith(what));
    expect(nestedItem('reference parameters')).toEqual({
      what: 'reference parameters (nf4-nested layer matrices, bf16 embedding)',
      bytes: nestedNf4Bytes(matrices) + 2 * embedding + norms,
    });
    expect(nestedItem('reward model parameters')).toEqual({
      what: 'reward model parameters (nf4-nested layer matrices, bf16 embedding)',
      bytes: nestedNf4Bytes(matrices) + 2 * embedding + norms + 4 * 128,
    });
  });

  it('a micro-batch whose q/k/v is above one binding attends over windows of each sequence: no problem, its keys and values gathered', () => {
    // qkv's (R, W = 256) is 8 × 1,024 tokens × 1 KiB = 8 MiB, above 4 MiB: each sequence attends in one window of
    // its 1,024 rows (1 MiB), against its keys gathered into 1,024 × 64 floats; keys and values of every token: 4 MiB.
    const device = { maxBindingBytes: 4 * MIB, memory: FOUR_GIB };
    const plan = planMemory(config([]), { actor, critic, rewardModel: null }, device);
    expect(plan.problems).toEqual([]);
    const update = plan.phases.find((p) => p.phase === 'actor update')!;
    expect(update.items).toContainEqual({
      what: 'attention keys and values gathered for its windows (8 × 1024 tokens)',
      bytes: 4 * MIB,
      key: 'actor attention update',
    });
    expect(update.largestTensor).toEqual({ what: 'row window (4096 of 8192 rows)', bytes: 4 * MIB });
    // Where the micro-batch's q/k/v binds (the update's 8 sequences; old log-probs' 16 still do not), nothing is
    // gathered.
    const whole = planMemory(config([]), { actor, critic, rewardModel: null }, { ...device, maxBindingBytes: 8 * MIB });
    const gathered = (phase: string) =>
      whole.phases.find((p) => p.phase === phase)!.items.some((i) => i.what.startsWith('attention keys'));
    expect(gathered('actor update')).toBe(false);
    expect(gathered('old log-probs')).toBe(true);
  });

  it("an MLP gate/up activation above one binding runs over windows of rows: no problem, its window the phase's largest tensor", () => {
    // 8 × 1,024 tokens × 2I = 768 floats = 24 MiB of gate/up, above 16 MiB: windows of 16 MiB / 3 KiB = 5,461 rows
    // (C = 128 floats: every row starts 256-byte aligned). qkv's (R, 256) is 8 MiB, bound whole.
    const device = { maxBindingBytes: 16 * MIB, memory: FOUR_GIB };
    const plan = planMemory(config([]), { actor, critic, rewardModel: null }, device);
    expect(plan.problems.filter((p) => /activation|binding/.test(p))).toEqual([]);
    const update = plan.phases.find((p) => p.phase === 'actor update')!;
    expect(update.largestTensor).toEqual({ what: 'MLP gate/up window (5461 of 8192 rows)', bytes: 5461 * 768 * 4 });
    // Where the whole activation binds, the plan reads as before: one window, the widest activation.
    const whole = planMemory(
      config([]),
      { actor, critic, rewardModel: null },
      { ...device, maxBindingBytes: 32 * MIB },
    );
    expect(whole.phases.find((p) => p.phase === 'actor update')!.largestTensor).toEqual({
      what: 'widest activation',
      bytes: 8 * 1024 * 768 * 4,
    });
  });

  it("a residual stream wider than q/k/v runs over windows too, and a sequence's keys above a binding over key windows", () => {
    // Old log-probs of 16 × 1,024 tokens: hidden 512 floats (2 KiB a token, 32 MiB) above a 16 MiB binding, qkv's
    // 256 (16 MiB) not; the gate/up windows hold 5,461 rows (16.0 MiB).
    const wide = parseHfConfig({ ...QWEN3_SMALL, hidden_size: 512 });
    const models = { actor: wide, critic: withHead(wide, 'token-classification'), rewardModel: null };
    const plan = planMemory(config([]), models, { maxBindingBytes: 16 * MIB, memory: FOUR_GIB });
    expect(plan.problems.filter((p) => /activation|binding|attention/.test(p))).toEqual([]);
    // Before the residual stream ran over windows, the plan refused it: a 32.0 MiB activation, above the binding.
    const oldLogprobs = plan.phases.find((p) => p.phase === 'old log-probs')!;
    expect(oldLogprobs.largestTensor).toEqual({ what: 'row window (8192 of 16384 rows)', bytes: 16 * MIB });
    // One sequence's keys, 1,024 tokens × 64 floats (256 KiB), above a 128 KiB binding: windows of 448 keys (a multiple
    // of the 64-row query windows), whose partial results (64 rows × 4 heads × (32 + 1) floats) are merged. Before key
    // windows the plan refused it ("one sequence's keys … which holds 511 tokens").
    const long = planMemory(config([]), models, { maxBindingBytes: 128 * 1024, memory: FOUR_GIB });
    expect(long.problems.filter((p) => /attention/.test(p))).toEqual([]);
    const update = long.phases.find((p) => p.phase === 'actor update')!;
    expect(update.items).toContainEqual({
      what: "attention key windows' partial output and log-sum-exp (64 rows)",
      bytes: 64 * 4 * 33 * 4,
      key: 'actor attention partials update',
    });
  });

  it('the rollout decodes as many sequences at once as its memory holds, not one binding: decode and prefill groups', () => {
    const plan = planMemory(
      config([
        'data.train_batch_size=512',
        'actor_rollout_ref.actor.ppo_mini_batch_size=8',
        'actor_rollout_ref.rollout.gpu_memory_utilization=1',
      ]),
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 16 * MIB, memory: FOUR_GIB },
    );
    // 16 MiB / (256 prompt tokens × 768 gate_up floats × 4 bytes) = 21 sequences per prefill gate_up binding: the
    // slots before decode groups. Now the prefill takes 21 at a time; a decode step's sampling logits, 27 rows a
    // binding (16 MiB / (151,936 × 4 bytes)), which bound the slots before logits windows, come in windows of 27
    // rows: all 512 decode at once, in less than 4 GiB.
    const [rollout] = plan.phases;
    expect(rollout.phase).toBe('rollout (512 of 512 sequences at once)');
    expect(rollout.items.find((i) => i.key === 'rollout prefill buffers')!.what).toMatch(/\(21 of 512 sequences/);
    expect(rollout.largestTensor.bytes).toBeLessThanOrEqual(16 * MIB);
    const shape = { promptLength: 256, capacity: continuousCacheCapacity(256, 768, DEFAULT_READ_EVERY), samples: 512 };
    const bytes = rolloutMemory(16 * MIB, actor, shape, 512).items.reduce((n, i) => n + i.bytes, 0);
    expect(bytes).toBeLessThan(4 * GIB);
  });

  it('a prompt whose prefill activation is above one binding is prefilled in chunks: no problem, a chunk the largest tensor', () => {
    // 1,024 prompt tokens × 2I = 768 floats × 4 bytes = 3 MiB of gate/up, above a 2 MiB binding: calls of 682 tokens.
    // The trainer's passes fit too (one sequence a micro-batch, its MLP in row windows). Before chunked prefill this
    // plan said "IncrementalDecoder: one sequence's the widest activation of 1024 tokens … needs 3145728 bytes".
    const plan = planMemory(
      config([
        'algorithm.adv_estimator=grpo',
        'data.train_batch_size=4',
        'actor_rollout_ref.rollout.n=2',
        'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1',
        'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1',
        'data.max_prompt_length=1024',
        'data.max_response_length=16',
      ]),
      { actor, critic: null, rewardModel: null },
      { maxBindingBytes: 2 * MIB, memory: FOUR_GIB },
    );
    expect(plan.problems).toEqual([]);
    const [rollout] = plan.phases;
    expect(rollout.items.find((i) => i.key === 'rollout prefill buffers')!.what).toMatch(
      /× 1024 prompt tokens in chunks of 682\)$/,
    );
    expect(rollout.largestTensor).toEqual({ what: 'widest prefill activation', bytes: 682 * 768 * 4 });
  });

  it(
    "Unsloth's GRPO on 24 GB: the rollout decodes all 64 Qwen3-1.7B LoRA sequences at once (bf16 cache), and takes " +
      "only what Qwen3-8B's resident base leaves, so the run's peak still fits",
    () => {
      const unsloth = [
        'algorithm.adv_estimator=grpo',
        'data.train_batch_size=8',
        'actor_rollout_ref.rollout.n=8',
        'actor_rollout_ref.actor.ppo_mini_batch_size=8',
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1',
        'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1',
        'actor_rollout_ref.model.lora_rank=64',
        'actor_rollout_ref.rollout.dtype=bfloat16',
      ];
      const qwen3 = (hidden: number, layers: number, heads: number, intermediate: number, tied: boolean) =>
        parseHfConfig({
          ...QWEN3_SMALL,
          hidden_size: hidden,
          intermediate_size: intermediate,
          num_hidden_layers: layers,
          num_attention_heads: heads,
          num_key_value_heads: 8,
          head_dim: 128,
          tie_word_embeddings: tied,
          torch_dtype: 'bfloat16',
        });
      const device = { maxBindingBytes: 128 * MIB, memory: overrideMemory(24 * GIB) };
      const small = planMemory(
        config(unsloth),
        { actor: qwen3(2048, 28, 16, 6144, true), critic: null, rewardModel: null },
        device,
      );
      expect(small.phases[0].phase).toBe('rollout (64 of 64 sequences at once)');
      expect(small.rolloutBudgetShrunk).toBe(false);
      expect(small.problems).toEqual([]);
      const large8b = () => qwen3(4096, 36, 32, 12288, false);
      const large = planMemory(config(unsloth), { actor: large8b(), critic: null, rewardModel: null }, device);
      // Its half of 24 GiB would take 53 sequences and a 32.7 GiB peak; the budget shrinks to what fits.
      expect(large.rolloutBudgetShrunk).toBe(true);
      expect(large.rolloutBudgetBytes).toBeLessThan(12 * GIB);
      expect(large.peakBytes).toBeLessThanOrEqual(24 * GIB);
      // Its bf16 gate_up_proj (2 · 12,288 × 4,096, 192 MiB) is above a 128 MiB binding: the matmuls take it in
      // windows of rows (kernels/matmul/matmul.ts), so nothing about it stops the plan.
      expect(large.problems).toEqual([]);
      const nf4 = config([...unsloth, 'actor_rollout_ref.model.load_in_4bit=true']);
      expect(planMemory(nf4, { actor: large8b(), critic: null, rewardModel: null }, device).problems).toEqual([]);
      expect(formatMemoryPlan(large, false)[0]).toMatch(/less what the rest of the run needs\)$/);
    },
  );

  it(
    'validation decodes the whole validation set through the rollout decoders, grown: a phase after the step, ' +
      'more sequences at once, freed before the next update',
    () => {
      const overrides = [
        'data.max_prompt_length=128',
        'data.max_response_length=16',
        'data.train_batch_size=4',
        'actor_rollout_ref.actor.ppo_mini_batch_size=2',
      ];
      const without = planMemory(
        config(overrides),
        { actor, critic, rewardModel: null },
        { maxBindingBytes: 128 * MIB, memory: FOUR_GIB },
      );
      const plan = planMemory(
        config(overrides),
        { actor, critic, rewardModel: null },
        { maxBindingBytes: 128 * MIB, memory: FOUR_GIB },
        { validation: { count: 1319, longest: 200 } },
      );
      expect(without.phases.map((p) => p.phase)).not.toContain(expect.stringMatching(/^validation/));
      const validation = plan.phases.find((p) => p.phase.startsWith('validation rollout'))!;
      // As many as the budget holds: before logits windows, one binding of sampling logits, 220 rows (128 MiB /
      // (151,936 logits × 4 bytes)).
      expect(validation.phase).toBe('validation rollout (1078 of 1319 sequences at once)');
      expect(validation.peakBytes).toBeGreaterThan(plan.phases[0].peakBytes);
      // Validation comes after the step's phases (a validation between steps holds everything else they left) and
      // regrows the rollout's decoders, which it frees when it ends: the step's phases are those of the plan without
      // validation, byte for byte, and validation's peak replaces the rollout's decoders by its larger ones.
      expect(plan.phases.at(-1)).toBe(validation);
      expect(plan.phases.slice(0, -1)).toEqual(without.phases);
      const [rollout] = without.phases;
      const step = without.phases.at(-1)!;
      expect(validation.keptBytes).toBe(step.keptBytes + step.bytes - rollout.bytes);
      expect(validation.peakBytes).toBe(step.peakBytes - rollout.bytes + validation.bytes);
      expect(plan.peakBytes).toBe(Math.max(without.peakBytes, validation.peakBytes));
      const sampled = planMemory(
        config([
          ...overrides,
          'actor_rollout_ref.rollout.val_kwargs.n=4',
          'actor_rollout_ref.rollout.val_kwargs.do_sample=true',
          'actor_rollout_ref.rollout.val_kwargs.temperature=0.6',
        ]),
        { actor, critic, rewardModel: null },
        { maxBindingBytes: 128 * MIB, memory: FOUR_GIB },
        { validation: { count: 10, longest: 100 } },
      );
      expect(sampled.phases.map((p) => p.phase)).toContain('validation rollout (40 of 40 sequences at once)');
    },
  );

  it('a peak above the budget names the phase and its keys', () => {
    const plan = planMemory(
      config(EVERY_LAYER),
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 4096 * MIB, memory: overrideMemory(0.7 * 2 ** 30) },
    );
    expect(plan.problems).toHaveLength(1);
    // The update's own activations are 0.25 GiB: the buffers the old log-probs, the values and the critic update
    // leave allocated (0.81 GiB) are what lowering their keys frees; the rollout's decoders are freed when it ends
    // (free_cache_engine), so its keys are not named.
    expect(plan.problems[0]).toBe(
      'peak 1.65 GiB (actor update) is above the memory budget of 0.70 GiB: lower ' +
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu; of it, 0.81 GiB stays allocated from earlier phases: ' +
        'lower actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu, critic.forward_micro_batch_size_per_gpu, ' +
        'critic.ppo_micro_batch_size_per_gpu',
    );
    // Kept through the updates, the rollout's decoders (0.08 GiB) are part of what stays, and its keys are named.
    const kept = planMemory(
      config([...EVERY_LAYER, 'actor_rollout_ref.rollout.free_cache_engine=false']),
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 4096 * MIB, memory: overrideMemory(0.7 * 2 ** 30) },
    );
    expect(kept.problems[0]).toBe(
      'peak 1.73 GiB (actor update) is above the memory budget of 0.70 GiB: lower ' +
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu; of it, 0.89 GiB stays allocated from earlier phases: ' +
        'lower actor_rollout_ref.rollout.gpu_memory_utilization, data.max_response_length, ' +
        'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu, critic.forward_micro_batch_size_per_gpu, ' +
        'critic.ppo_micro_batch_size_per_gpu',
    );
    const tiny = planMemory(
      config(EVERY_LAYER),
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 4096 * MIB, memory: overrideMemory(0.3 * 2 ** 30) },
    );
    expect(tiny.problems[0]).toMatch(/the models alone take .* — use a smaller model/);
  });

  it(
    'the rollout decodes as many sequences at once as its share of the device memory holds: the slot count follows ' +
      'the budget',
    () => {
      const overrides = config(['data.train_batch_size=16384', 'actor_rollout_ref.actor.ppo_mini_batch_size=8']);
      const slots = (memory: ReturnType<typeof overrideMemory>) =>
        Number(
          /^rollout \((\d+) of 16384/.exec(
            planMemory(overrides, { actor, critic, rewardModel: null }, { maxBindingBytes: 64 * 1024 * MIB, memory })
              .phases[0].phase,
          )![1],
        );
      const h100 = deviceMemorySize(
        { description: 'nvidia hopper NVIDIA H100 80GB HBM3', software: false },
        null,
        null,
      );
      const small = slots(FOUR_GIB);
      // 0.5 of 80 GiB holds 20 times the sequences of 0.5 of 4 GiB (within the floor of each division).
      expect(slots(h100)).toBeGreaterThanOrEqual(20 * small);
      expect(slots(h100)).toBeLessThan(20 * (small + 1));
      const lowered = planMemory(
        config([
          'data.train_batch_size=16384',
          'actor_rollout_ref.actor.ppo_mini_batch_size=8',
          'actor_rollout_ref.rollout.gpu_memory_utilization=0.25',
        ]),
        { actor, critic, rewardModel: null },
        { maxBindingBytes: 64 * 1024 * MIB, memory: h100 },
      );
      expect(lowered.rolloutBudgetBytes).toBe(20 * GIB);
      expect(lowered.phases[0].phase).toMatch(new RegExp(`^rollout \\(${Math.floor(slots(h100) / 2)} of 16384`));
    },
  );

  it('prints what the budget is, and a guessed size says which knob sets the real one', () => {
    const h100 = planMemory(
      config([]),
      { actor, critic, rewardModel: null },
      {
        maxBindingBytes: 128 * MIB,
        memory: deviceMemorySize({ description: 'nvidia hopper NVIDIA H100 PCIe', software: false }, null, null),
      },
    );
    expect(formatMemoryPlan(h100, false).slice(0, 2)).toEqual([
      expect.stringMatching(
        /^memory plan: resident .* of a 80\.00 GiB budget, the rollout's 40\.00 GiB of it \(actor_rollout_ref\.rollout\.gpu_memory_utilization\)$/,
      ),
      '  budget: device memory of nvidia hopper NVIDIA H100 PCIe: 80 GiB (table)',
    ]);
    const unknown = deviceMemorySize({ description: 'acme gpu-9000', software: false }, null, null);
    const plan = planMemory(
      config(EVERY_LAYER),
      { actor, critic, rewardModel: null },
      { maxBindingBytes: 4096 * MIB, memory: { ...unknown, bytes: 0.7 * GIB } },
    );
    expect(plan.problems[0]).toMatch(
      /above the memory budget of 0\.70 GiB \(a guess: set WEBGPU_DEVICE_MEMORY to the device's memory\): lower actor_rollout_ref\.actor\.ppo_micro_batch_size_per_gpu;/,
    );
  });
});

describe('node tools/bench.js memory', () => {
  // The bad input is found before the device is asked for its memory, so no engine is needed.
  const noEngine = {} as Engine;

  it('an unknown key or a directory without config.json is one line (the suite exits 2), not a stack trace', async () => {
    const dir = await makeTempDir('memory-plan-');
    await writeFile(join(dir, 'config.json'), JSON.stringify(QWEN3_SMALL));
    expect(await memoryPlanOfCheckpoint(noEngine, ['memory', '--model', dir, 'foo.bar=1'])).toBe(
      'configuration error: unknown key foo.bar (command line)',
    );
    const empty = join(dir, 'empty');
    expect(await memoryPlanOfCheckpoint(noEngine, ['memory', '--model', empty])).toBe(
      `--model ${empty}: no config.json there`,
    );
  });
});
