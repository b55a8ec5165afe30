// train.js under a binding below a layer weight (WEBGPU_MAX_BINDING_BYTES=8 KiB): the tiny model's float32
// gate_up_proj [128, 32] is 16 KiB, so every matmul by it runs over windows of its rows (kernels/matmul/matmul.ts
// weightWindows; 8 KiB still holds a rollout row's KV cache layer): the rollout's prefill and decode steps,
// the old log-probs, the reference's forward and the actor update (forward, dx = dy·W, and the weight gradients
// written a window of rows at a time; under LoRA dx = dy·W alone), then AdamW. Micro-batches of one sequence keep
// the activations within the binding. Without the windows the step fails at the rollout's first gate/up product
// ("kernel matmul/register-nt: binding b (tensor actor:model.layers.0.mlp.gate_up_proj.weight, [128, 32]) spans
// 16384 bytes but this device binds at most 8192 bytes").
import { describe, it, expect, vi, afterEach } from 'vitest';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { join } from 'node:path';

const BINDING = 8 * 1024;

describe('weight windows in a run', () => {
  afterEach(() => vi.unstubAllEnvs());

  for (const lora of [false, true]) {
    it(`a GRPO step${lora ? ' of LoRA (rank 4) on the float32 base' : ''} under a binding below the layer weights finishes, every loss finite`, async () => {
      const { root, overrides } = await makeTinyRun();
      vi.stubEnv('WEBGPU_MAX_BINDING_BYTES', String(BINDING));
      const dir = join(root, 'run');
      expect(
        await main([
          ...overrides,
          'algorithm.adv_estimator=grpo',
          'actor_rollout_ref.rollout.n=2',
          'actor_rollout_ref.actor.ppo_mini_batch_size=4',
          'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1',
          'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1',
          'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1',
          'actor_rollout_ref.actor.use_kl_loss=true',
          ...(lora ? ['actor_rollout_ref.model.lora_rank=4', 'actor_rollout_ref.model.lora_alpha=8'] : []),
          `trainer.default_local_dir=${dir}`,
          'trainer.total_training_steps=1',
        ]),
      ).toBe(0);
      const [step] = (await runMetrics(dir)).filter((m) => m.data['actor/pg_loss'] !== undefined);
      for (const key of ['actor/pg_loss', 'actor/kl_loss', 'actor/grad_norm'])
        expect(Number.isFinite(step.data[key]), key).toBe(true);
    });
  }
});
