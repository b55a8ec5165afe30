// LoRA through train.js as verl users ask for it (actor_rollout_ref.model.lora_rank=8, a GAE critic, KL loss to the
// reference): only the adapters change (the saved base is bit-identical to the model it started from), the first
// update's KL to the reference is exactly 0 (B starts at zero, so the adapted actor is the base model), checkpoints
// hold the adapter in PEFT's format and the merged model, a run resumes bit-identically, and a saved adapter given as
// lora_adapter_path starts a run with the same logits.
import { describe, it, expect, vi } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { parseSafetensors } from '../../models/safetensors.ts';
import { Engine } from '../../engine/index.ts';
import { loadModel } from '../../models/model-files-node.ts';
import { loadLoraAdapter, readLoraAdapter } from '../../models/lora-files-node.ts';
import { CausalLm } from '../../models/causal-lm.ts';
import { uploadTokenBatch } from '../../models/token-batch.ts';
import { mergeLora } from '../../models/lora.ts';
import { readHfTensors } from '../../models/parameter-store.ts';
import { expectClose } from '../support/arrays.ts';

function withoutTimings({ data: metrics }: { data: Record<string, number> }): Record<string, number> {
  for (const key of Object.keys(metrics))
    if (key.startsWith('timing_s/') || key.startsWith('perf/')) delete metrics[key];
  return metrics;
}

async function tensorsOf(file: string) {
  return parseSafetensors(new Uint8Array(await readFile(file)), file).tensors;
}

describe('LoRA run', () => {
  it('trains only the adapters, starts at KL 0, saves PEFT + merged checkpoints, resumes, and loads ' +
    'lora_adapter_path', async () => {
    const { root, overrides } = await makeTinyRun();
    const common = [
      ...overrides,
      'actor_rollout_ref.model.lora_rank=8',
      'actor_rollout_ref.model.lora_alpha=16',
      'actor_rollout_ref.model.lora_save_merged=true',
      'actor_rollout_ref.actor.use_kl_loss=true',
      'actor_rollout_ref.actor.ppo_mini_batch_size=4',
      'trainer.save_freq=1',
    ];
    const a = join(root, 'a');
    const b = join(root, 'b');
    expect(await main([...common, `trainer.default_local_dir=${a}`, 'trainer.total_training_steps=2'])).toBe(0);
    expect(await main([...common, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=1'])).toBe(0);
    expect(await main([...common, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=2'])).toBe(0);

    const metrics = (await runMetrics(a)).map(withoutTimings).filter((m) => m['critic/score/mean'] !== undefined);
    expect(metrics[0]['actor/kl_loss']).toBe(0);
    expect(metrics[1]['actor/kl_loss']).toBeGreaterThan(0);
    expect((await runMetrics(b)).map(withoutTimings).filter((m) => m['critic/score/mean'] !== undefined)).toEqual(
      metrics,
    );

    // Base weights bit-identical to the starting model; the adapter moved.
    const start = await tensorsOf(join(root, 'model', 'model.safetensors'));
    const saved = await tensorsOf(join(a, 'global_step_2', 'actor', 'model.safetensors'));
    for (const [name, data] of start) expect(saved.get(name), name).toEqual(data);
    const adapterDir = join(a, 'global_step_2', 'actor', 'lora_adapter');
    const adapterConfig = JSON.parse(await readFile(join(adapterDir, 'adapter_config.json'), 'utf8'));
    expect(adapterConfig).toMatchObject({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 8,
      lora_alpha: 16,
      bias: 'none',
      use_rslora: false,
      use_dora: false,
      target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
    });
    const adapter = await readLoraAdapter(adapterDir);
    const bName = 'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight';
    expect(adapter.tensors.get(bName)!.shape).toEqual([32, 8]);
    expect(adapter.tensors.get(bName)!.data.some((v) => v !== 0)).toBe(true);
    for (const file of ['actor/lora_adapter/adapter_model.safetensors', 'actor/optimizer.safetensors']) {
      expect(
        Buffer.compare(await readFile(join(a, 'global_step_2', file)), await readFile(join(b, 'global_step_2', file))),
        file,
      ).toBe(0);
    }

    // The merged directory is base + scaling·B·A; the adapter on the base gives the merged model's logits.
    const engine = await Engine.create();
    try {
      const base = await loadModel(engine, join(a, 'global_step_2', 'actor'), { label: 'base' });
      const merged = await loadModel(engine, join(a, 'global_step_2', 'actor', 'lora_merged'), { label: 'merged' });
      const expected = mergeLora(
        base.config,
        adapter.settings,
        await readHfTensors(engine, base.params, base.config),
        adapter.tensors,
      );
      for (const [name, t] of await readHfTensors(engine, merged.params, merged.config))
        expect(t.data, name).toEqual(expected.get(name)!.data);
      const lora = await loadLoraAdapter(engine, adapterDir, base.config, 'loaded');
      const logits = async (params: typeof base.params, withLora: boolean) => {
        const lm = new CausalLm(engine, base.config, params);
        lm.trunk.lora = withLora ? lora : null;
        const batch = uploadTokenBatch(
          engine,
          { inputIds: [[1, 5, 7, 2]], attentionMask: [[1, 1, 1, 1]] },
          base.config.vocabSize,
        );
        return engine.read(lm.logits(batch, engine.tensor('logits', [4, base.config.vocabSize])));
      };
      expectClose(
        await logits(base.params, true),
        await logits(merged.params, false),
        1e-5,
        1e-4,
        'adapter vs merged logits',
      );
    } finally {
      engine.destroy();
    }

    // lora_adapter_path: a run starting from the saved adapter (rank from its adapter_config.json).
    const c = join(root, 'c');
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      expect(
        await main([
          ...overrides,
          `actor_rollout_ref.model.lora_adapter_path=${adapterDir}`,
          `trainer.default_local_dir=${c}`,
          'trainer.total_training_steps=1',
          'actor_rollout_ref.actor.optim.lr=0',
          'trainer.save_freq=1',
          'trainer.logger=[console]',
        ]),
      ).toBe(0);
      // 7 modules × r·(in + out) on the 32-wide, 1-layer model (q 32, k/v 16, intermediate 64).
      const trainable = 8 * (32 + 32 + 2 * (32 + 16) + (32 + 32) + 2 * (32 + 64) + (64 + 32));
      expect(log.mock.calls.map((args) => String(args[0]))).toContain(
        `LoRA r=8, lora_alpha 16 on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj: ` +
          `${trainable.toLocaleString('en-US')} trainable parameters of ` +
          `${[...start.values()].reduce((n, t) => n + t.length, 0).toLocaleString('en-US')} (the base model frozen)`,
      );
    } finally {
      log.mockRestore();
    }
    const reloaded = await tensorsOf(join(c, 'global_step_1', 'actor', 'lora_adapter', 'adapter_model.safetensors'));
    for (const [name, t] of adapter.tensors) expect(reloaded.get(name), name).toEqual(t.data);
  }, 600_000);
});
