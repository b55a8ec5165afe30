// Critic LoRA through train.js (critic.model.lora_rank=8, verl's key; issue 35 item 6): the GAE critic trains only
// its adapters and its value head (PEFT's modules_to_save), its value loss falls over a short run, the saved critic
// base stays the model it started from, checkpoints hold critic/lora_adapter in PEFT's format, and a run stopped
// after step 1 resumes bit-identically (metrics and every checkpoint file); a bf16 critic base trains and resumes too.
import { describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { parseSafetensors } from '../../models/safetensors.ts';
import { readLoraAdapter } from '../../models/lora-files-node.ts';

function withoutTimings({ data: metrics }: { data: Record<string, number> }): Record<string, number> {
  for (const key of Object.keys(metrics))
    if (key.startsWith('timing_s/') || key.startsWith('perf/')) delete metrics[key];
  return metrics;
}

async function tensorsOf(file: string) {
  return parseSafetensors(new Uint8Array(await readFile(file)), file).tensors;
}

describe('critic LoRA run', () => {
  it('trains the critic adapters and score, lowers the value loss, saves PEFT and resumes bit-identically', async () => {
    const { root, overrides } = await makeTinyRun();
    const common = [
      ...overrides,
      'algorithm.adv_estimator=gae',
      'critic.model.lora_rank=8',
      'critic.model.lora_alpha=16',
      'critic.optim.lr=0.003',
      'critic.ppo_epochs=4',
      'trainer.save_freq=1',
    ];
    const a = join(root, 'a');
    const b = join(root, 'b');
    const steps = 8;
    expect(await main([...common, `trainer.default_local_dir=${a}`, `trainer.total_training_steps=${steps}`])).toBe(0);
    const metrics = (await runMetrics(a)).map(withoutTimings).filter((m) => m['critic/vf_loss'] !== undefined);
    expect(metrics).toHaveLength(steps);
    const loss = metrics.map((m) => m['critic/vf_loss']);
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(mean(loss.slice(-3))).toBeLessThan(0.5 * mean(loss.slice(0, 3)));

    // The critic's base is frozen: every step's saved critic/ weights equal the first's; the adapter and score moved.
    const first = await tensorsOf(join(a, 'global_step_1', 'critic', 'model.safetensors'));
    const last = await tensorsOf(join(a, `global_step_${steps}`, 'critic', 'model.safetensors'));
    for (const [name, data] of first) expect(last.get(name), name).toEqual(data);
    const adapter = await readLoraAdapter(join(a, `global_step_${steps}`, 'critic', 'lora_adapter'), ['score']);
    expect(adapter.settings.rank).toBe(8);
    expect(Array.from(adapter.tensors.get('base_model.model.score.weight')!.data)).not.toEqual(
      Array.from(first.get('score.weight')!),
    );
    const bName = 'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight';
    expect(adapter.tensors.get(bName)!.data.some((x) => x !== 0)).toBe(true);

    // Stopped after step 1 and resumed: the same metrics and the same step-2 files, byte for byte.
    expect(await main([...common, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=1'])).toBe(0);
    expect(await main([...common, `trainer.default_local_dir=${b}`, `trainer.total_training_steps=${steps}`])).toBe(0);
    expect((await runMetrics(b)).map(withoutTimings).filter((m) => m['critic/vf_loss'] !== undefined)).toEqual(metrics);
    for (const file of [
      'critic/lora_adapter/adapter_model.safetensors',
      'critic/lora_adapter/adapter_config.json',
      'critic/optimizer.safetensors',
      'critic/model.safetensors',
      'actor/model.safetensors',
    ])
      expect(await readFile(join(b, `global_step_${steps}`, file)), file).toEqual(
        await readFile(join(a, `global_step_${steps}`, file)),
      );

    // A bf16 base (critic.model.fsdp_config.model_dtype, as a frozen model's): trains and resumes the same way.
    const half = [...common, 'critic.model.fsdp_config.model_dtype=bf16'];
    const c = join(root, 'c');
    const d = join(root, 'd');
    expect(await main([...half, `trainer.default_local_dir=${c}`, 'trainer.total_training_steps=3'])).toBe(0);
    expect(await main([...half, `trainer.default_local_dir=${d}`, 'trainer.total_training_steps=1'])).toBe(0);
    expect(await main([...half, `trainer.default_local_dir=${d}`, 'trainer.total_training_steps=3'])).toBe(0);
    const halfMetrics = (await runMetrics(c)).map(withoutTimings).filter((m) => m['critic/vf_loss'] !== undefined);
    expect(halfMetrics).toHaveLength(3);
    expect(halfMetrics.map((m) => m['critic/vf_loss'])).not.toEqual(loss.slice(0, 3));
    expect((await runMetrics(d)).map(withoutTimings).filter((m) => m['critic/vf_loss'] !== undefined)).toEqual(
      halfMetrics,
    );
  });
});
