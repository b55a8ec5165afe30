// Mixed-precision training through train.js (actor_rollout_ref.actor.fsdp_config.dtype and
// critic.model.fsdp_config.dtype, verl's keys): a GAE run computes in bf16 over float32 master weights. Its checkpoints
// hold the master weights (off the bf16 grid after the updates, not the half compute copy), and a run stopped after
// step 1 resumes bit-identically: the same metrics and the same step-3 files, byte for byte — the compute copy is
// remade from the reloaded master exactly as it was from the uninterrupted one.
import { describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { parseSafetensors } from '../../models/safetensors.ts';
import { roundToHalf } from '../../engine/index.ts';

function withoutTimings({ data: metrics }: { data: Record<string, number> }): Record<string, number> {
  for (const key of Object.keys(metrics))
    if (key.startsWith('timing_s/') || key.startsWith('perf/')) delete metrics[key];
  return metrics;
}

describe('mixed-precision run', () => {
  it('bf16 compute: saves float32 master weights and resumes bit-identically', async () => {
    const { root, overrides } = await makeTinyRun();
    const common = [...overrides, 'algorithm.adv_estimator=gae', 'trainer.save_freq=1'];
    const mixed = [
      ...common,
      'actor_rollout_ref.actor.fsdp_config.dtype=bfloat16',
      'critic.model.fsdp_config.dtype=bfloat16',
    ];
    const [a, b, f] = ['a', 'b', 'f32'].map((name) => join(root, name));
    expect(await main([...mixed, `trainer.default_local_dir=${a}`, 'trainer.total_training_steps=3'])).toBe(0);
    const metrics = (await runMetrics(a)).map(withoutTimings).filter((m) => m['actor/pg_loss'] !== undefined);
    expect(metrics).toHaveLength(3);
    // The training forward is bf16, the sampler float32: old log-probs are recomputed, the gap reported.
    expect(metrics[0]['rollout_corr/kl']).not.toBe(0);
    expect(Number.isFinite(metrics[0]['rollout_corr/kl'])).toBe(true);

    // The same run in float32 differs (the compute copy is really used).
    expect(await main([...common, `trainer.default_local_dir=${f}`, 'trainer.total_training_steps=1'])).toBe(0);
    const full = (await runMetrics(f)).map(withoutTimings).filter((m) => m['actor/pg_loss'] !== undefined);
    expect(full[0]['critic/vf_loss']).not.toBe(metrics[0]['critic/vf_loss']);

    // Saved: the float32 master, whose updated matrices are mostly off the bf16 grid.
    for (const model of ['actor', 'critic']) {
      const file = join(a, 'global_step_3', model, 'model.safetensors');
      const tensors = parseSafetensors(new Uint8Array(await readFile(file)), file).tensors;
      const down = tensors.get('model.layers.0.mlp.down_proj.weight')!;
      const offGrid = Array.from(down).filter((x) => x !== roundToHalf('bf16', [x])[0]).length;
      expect(offGrid, model).toBeGreaterThan(down.length / 2);
    }

    // Stopped after step 1 and resumed: the same metrics and the same step-3 files.
    expect(await main([...mixed, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=1'])).toBe(0);
    expect(await main([...mixed, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=3'])).toBe(0);
    expect((await runMetrics(b)).map(withoutTimings).filter((m) => m['actor/pg_loss'] !== undefined)).toEqual(metrics);
    for (const file of [
      'actor/model.safetensors',
      'actor/optimizer.safetensors',
      'critic/model.safetensors',
      'critic/optimizer.safetensors',
    ])
      expect(await readFile(join(b, 'global_step_3', file)), file).toEqual(
        await readFile(join(a, 'global_step_3', file)),
      );
  });
});
