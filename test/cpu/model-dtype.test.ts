// Frozen models' stored dtype from verl's fsdp_config.model_dtype: null follows the checkpoint (a bf16
// checkpoint's reference is bf16, exactly its own values), every verl spelling maps to one dtype, a trained
// critic stays float32, and a half dtype asked for a trained model is one line, not a silent change. A trained model's
// compute dtype from fsdp_config.dtype (mixed precision), and verl's older mixed_precision.param_dtype spelling.
import { describe, it, expect } from 'vitest';
import {
  loadConfig,
  weightDtype,
  frozenStorage,
  trainedModelDtypeNotes,
  actorBaseStorage,
  computeDtype,
} from '../../ppo/config.ts';

const config = (...overrides: string[]) => loadConfig({ overrides: ['actor_rollout_ref.model.path=/m', ...overrides] });

describe('fsdp_config.model_dtype', () => {
  it('null (the default) stores a frozen model as its checkpoint came', () => {
    const c = config();
    expect(c.actor_rollout_ref.ref.fsdp_config.model_dtype).toBeNull();
    expect(weightDtype(c, 'reference', 'bfloat16')).toBe('bf16');
    expect(weightDtype(c, 'reference', 'float32')).toBe('f32');
    expect(weightDtype(c, 'reward_model', 'float16')).toBe('f16');
  });

  it('takes every verl spelling, for the reference, the reward model and a frozen critic', () => {
    for (const [value, dtype] of [
      ['fp32', 'f32'],
      ['float32', 'f32'],
      ['bf16', 'bf16'],
      ['bfloat16', 'bf16'],
      ['fp16', 'f16'],
      ['float16', 'f16'],
    ] as const) {
      const c = config(
        `actor_rollout_ref.ref.fsdp_config.model_dtype=${value}`,
        `reward_model.model.fsdp_config.model_dtype=${value}`,
        `critic.model.fsdp_config.model_dtype=${value}`,
        'critic.freeze=true',
      );
      expect([
        weightDtype(c, 'reference', 'bfloat16'),
        weightDtype(c, 'reward_model', 'float32'),
        weightDtype(c, 'critic', 'float32'),
      ]).toEqual([dtype, dtype, dtype]);
    }
    expect(() => config('actor_rollout_ref.ref.fsdp_config.model_dtype=int8')).toThrow(
      /model_dtype .*unknown value "?int8"?.*expected one of fp32, float32, bf16, bfloat16, fp16, float16/,
    );
  });

  it('a trained model keeps float32 and says so in one line', () => {
    const c = config(
      'actor_rollout_ref.actor.fsdp_config.model_dtype=bf16',
      'critic.model.fsdp_config.model_dtype=bf16',
    );
    expect(weightDtype(c, 'critic', 'bfloat16')).toBe('f32');
    const notes = trainedModelDtypeNotes(c);
    expect(notes).toHaveLength(2);
    expect(notes[0]).toMatch(
      /^actor_rollout_ref\.actor\.fsdp_config\.model_dtype=bf16: this model trains, so its weights stay float32 master copies/,
    );
    expect(trainedModelDtypeNotes(config('critic.model.fsdp_config.model_dtype=bf16', 'critic.freeze=true'))).toEqual(
      [],
    );
    expect(trainedModelDtypeNotes(config('actor_rollout_ref.actor.fsdp_config.model_dtype=fp32'))).toEqual([]);
  });

  it('the actor: float32 when it all trains; under LoRA its frozen base as model_dtype or the checkpoint says', () => {
    const lora = 'actor_rollout_ref.model.lora_rank=8';
    expect(actorBaseStorage(config(), 'bfloat16')).toBe('f32');
    expect(actorBaseStorage(config('actor_rollout_ref.actor.fsdp_config.model_dtype=bf16'), 'bfloat16')).toBe('f32');
    expect(actorBaseStorage(config(lora), 'bfloat16')).toBe('bf16');
    expect(actorBaseStorage(config(lora), 'float16')).toBe('f16');
    expect(actorBaseStorage(config(lora), 'float32')).toBe('f32');
    expect(actorBaseStorage(config(lora, 'actor_rollout_ref.actor.fsdp_config.model_dtype=fp32'), 'bfloat16')).toBe(
      'f32',
    );
    expect(actorBaseStorage(config(lora, 'actor_rollout_ref.actor.fsdp_config.model_dtype=bf16'), 'float32')).toBe(
      'bf16',
    );
    expect(actorBaseStorage(config('actor_rollout_ref.model.lora_adapter_path=/a'), 'bfloat16')).toBe('bf16');
    // Under LoRA the key is honoured, so no note.
    expect(trainedModelDtypeNotes(config(lora, 'actor_rollout_ref.actor.fsdp_config.model_dtype=bf16'))).toEqual([]);
  });

  it('load_in_4bit / use_bnb_nested_quant / load_in_8bit: a quantized LoRA base; without LoRA, both, refused', () => {
    const lora = 'actor_rollout_ref.model.lora_rank=8';
    const base = (...keys: string[]) => actorBaseStorage(config(lora, ...keys), 'bfloat16');
    expect(base('actor_rollout_ref.model.load_in_4bit=true')).toBe('nf4');
    expect(base('actor_rollout_ref.model.load_in_4bit=true', 'actor_rollout_ref.model.use_bnb_nested_quant=true')).toBe(
      'nf4-nested',
    );
    expect(base('actor_rollout_ref.model.load_in_8bit=true')).toBe('int8');
    for (const key of ['load_in_4bit', 'load_in_8bit'])
      expect(() => config(`actor_rollout_ref.model.${key}=true`)).toThrow(
        new RegExp(
          `actor_rollout_ref\\.model\\.${key}=true quantizes a frozen LoRA base, but LoRA is off — set actor_rollout_ref\\.model\\.lora_rank`,
        ),
      );
    expect(() =>
      config(lora, 'actor_rollout_ref.model.load_in_8bit=true', 'actor_rollout_ref.model.load_in_4bit=true'),
    ).toThrow(/actor_rollout_ref\.model\.load_in_8bit=true and load_in_4bit=true: the model is quantized one way/);
    expect(() =>
      config(lora, 'actor_rollout_ref.model.load_in_8bit=true', 'actor_rollout_ref.model.use_bnb_nested_quant=true'),
    ).toThrow(/use_bnb_nested_quant=true double-quantizes the NF4 block scales, but load_in_4bit is false/);
  });
});

describe('ref.load_in_4bit / load_in_8bit, reward_model.model.load_in_4bit / load_in_8bit', () => {
  const kl = 'actor_rollout_ref.actor.use_kl_loss=true';
  const rm = ['reward_model.enable=true', 'reward_model.model.path=/rm'];
  it('quantize a separate reference and a reward model, in verl HEAD reward tree spelling too', () => {
    const c = config(kl, 'actor_rollout_ref.ref.load_in_4bit=true', ...rm, 'reward_model.model.load_in_8bit=true');
    expect(frozenStorage(c, 'reference', 'bfloat16')).toBe('nf4');
    expect(frozenStorage(c, 'reward_model', 'bfloat16')).toBe('int8');
    const head = config(
      kl,
      'actor_rollout_ref.ref.load_in_8bit=true',
      'reward.reward_model.enable=true',
      'reward.reward_model.model_path=/rm',
      'reward.reward_model.load_in_4bit=true',
    );
    expect(frozenStorage(head, 'reference', 'float32')).toBe('int8');
    expect(frozenStorage(head, 'reward_model', 'float32')).toBe('nf4');
    // Off: model_dtype, or the checkpoint's dtype, as before.
    expect(
      frozenStorage(config(kl, 'actor_rollout_ref.ref.fsdp_config.model_dtype=bf16'), 'reference', 'float32'),
    ).toBe('bf16');
    expect(frozenStorage(config(...rm), 'reward_model', 'float16')).toBe('f16');
  });

  it('use_bnb_nested_quant double-quantizes the NF4 scales of either, in verl HEAD reward tree spelling too', () => {
    const nested = config(
      kl,
      'actor_rollout_ref.ref.load_in_4bit=true',
      'actor_rollout_ref.ref.use_bnb_nested_quant=true',
      'reward.reward_model.enable=true',
      'reward.reward_model.model_path=/rm',
      'reward.reward_model.load_in_4bit=true',
      'reward.reward_model.use_bnb_nested_quant=true',
    );
    expect(frozenStorage(nested, 'reference', 'bfloat16')).toBe('nf4-nested');
    expect(frozenStorage(nested, 'reward_model', 'bfloat16')).toBe('nf4-nested');
    // One model's key leaves the other's scales float32.
    const one = config(kl, 'actor_rollout_ref.ref.load_in_4bit=true', ...rm, 'reward_model.model.load_in_4bit=true');
    expect(frozenStorage(one, 'reference', 'bfloat16')).toBe('nf4');
    const refOnly = config(
      kl,
      'actor_rollout_ref.ref.load_in_4bit=true',
      'actor_rollout_ref.ref.use_bnb_nested_quant=true',
      ...rm,
      'reward_model.model.load_in_4bit=true',
    );
    expect([frozenStorage(refOnly, 'reference', 'float32'), frozenStorage(refOnly, 'reward_model', 'float32')]).toEqual(
      ['nf4-nested', 'nf4'],
    );
  });

  it('refuses a key that quantizes nothing, and both widths at once, in one line naming the key', () => {
    expect(() => config('actor_rollout_ref.ref.load_in_4bit=true')).toThrow(
      /actor_rollout_ref\.ref\.load_in_4bit=true quantizes nothing: there is no reference without a KL term/,
    );
    expect(() => config(kl, 'actor_rollout_ref.model.lora_rank=8', 'actor_rollout_ref.ref.load_in_8bit=true')).toThrow(
      /actor_rollout_ref\.ref\.load_in_8bit=true quantizes nothing: under LoRA the reference is the actor's frozen base/,
    );
    expect(() => config('reward_model.model.load_in_8bit=true')).toThrow(
      /reward_model\.model\.load_in_8bit=true quantizes nothing: reward_model\.enable is false/,
    );
    expect(() => config(...rm, 'reward_model.model.load_in_4bit=true', 'reward_model.model.load_in_8bit=true')).toThrow(
      /reward_model\.model\.load_in_8bit=true and load_in_4bit=true: the model is quantized one way/,
    );
    expect(() => config(kl, 'actor_rollout_ref.ref.use_bnb_nested_quant=true')).toThrow(
      /actor_rollout_ref\.ref\.use_bnb_nested_quant=true double-quantizes the NF4 block scales, but load_in_4bit is false — set actor_rollout_ref\.ref\.load_in_4bit=true/,
    );
    expect(() =>
      config(...rm, 'reward_model.model.load_in_8bit=true', 'reward.reward_model.use_bnb_nested_quant=true'),
    ).toThrow(/reward_model\.model\.use_bnb_nested_quant=true double-quantizes the NF4 block scales, but load_in_4bit/);
  });
});

describe('fsdp_config.dtype (mixed precision)', () => {
  it('float32 by default; bf16/f16 for a model whose weights all train, in every spelling', () => {
    expect([computeDtype(config(), 'actor'), computeDtype(config(), 'critic')]).toEqual(['f32', 'f32']);
    const c = config('actor_rollout_ref.actor.fsdp_config.dtype=bfloat16', 'critic.model.fsdp_config.dtype=fp16');
    expect([computeDtype(c, 'actor'), computeDtype(c, 'critic')]).toEqual(['bf16', 'f16']);
    expect(trainedModelDtypeNotes(c)).toEqual([]);
    expect(() => config('actor_rollout_ref.actor.fsdp_config.dtype=int8')).toThrow(
      /fsdp_config\.dtype.*unknown value "?int8"?.*expected one of fp32, float32, bf16, bfloat16, fp16, float16/,
    );
  });

  it("verl's older mixed_precision.param_dtype and 1dda039b's critic.fsdp.dtype set it", () => {
    const old = config(
      'actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16',
      'actor_rollout_ref.actor.fsdp_config.mixed_precision.reduce_dtype=fp32',
      'critic.model.fsdp_config.mixed_precision.param_dtype=bf16',
    );
    expect([computeDtype(old, 'actor'), computeDtype(old, 'critic')]).toEqual(['bf16', 'bf16']);
    expect(computeDtype(config('critic.fsdp.dtype=bfloat16'), 'critic')).toBe('bf16');
    // The nested key of the current spelling wins over the moved block's.
    expect(computeDtype(config('critic.fsdp.dtype=bfloat16', 'critic.model.fsdp_config.dtype=float32'), 'critic')).toBe(
      'f32',
    );
  });

  it('a LoRA actor or a frozen critic computes as stored, with one line', () => {
    const c = config(
      'actor_rollout_ref.model.lora_rank=8',
      'actor_rollout_ref.actor.fsdp_config.dtype=bfloat16',
      'critic.freeze=true',
      'critic.model.fsdp_config.dtype=bfloat16',
    );
    expect([computeDtype(c, 'actor'), computeDtype(c, 'critic')]).toEqual(['f32', 'f32']);
    const notes = trainedModelDtypeNotes(c);
    expect(notes).toHaveLength(2);
    expect(notes[0]).toMatch(
      /^actor_rollout_ref\.actor\.fsdp_config\.dtype=bfloat16: mixed precision is for weights that all train; this actor's frozen matrices compute in their stored dtype/,
    );
    expect(notes[1]).toMatch(/^critic\.model\.fsdp_config\.dtype=bfloat16: mixed precision is for weights/);
  });
});
