// train.js under a binding too small for the MLP's gate/up activation (WEBGPU_MAX_BINDING_BYTES=16 KiB): a
// micro-batch of the tiny model (4 sequences of 6 prompt + 3 response tokens) has an 18 KiB (R = 36, 2I = 128)
// gate/up activation and a 9 KiB (R, W = 64) qkv, so the trunk runs its MLP over windows of rows in the old
// log-probs, the reference's forward and the actor update, and the step finishes. On main before this change it
// failed at the first gate/up dispatch ("binding out (tensor trunk.infer.a.gateUp, [36, 128]) spans 18432 bytes").
import { describe, it, expect, vi, afterEach } from 'vitest';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { join } from 'node:path';

const BINDING = 16 * 1024;

describe('MLP row windows in a run', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('a GRPO step under a binding below the gate/up activation finishes, every loss finite', async () => {
    const { root, overrides } = await makeTinyRun();
    vi.stubEnv('WEBGPU_MAX_BINDING_BYTES', String(BINDING));
    const dir = join(root, 'run');
    expect(
      await main([
        ...overrides,
        'algorithm.adv_estimator=grpo',
        'actor_rollout_ref.rollout.n=2',
        'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4',
        'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4',
        'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4',
        'actor_rollout_ref.actor.use_kl_loss=true',
        `trainer.default_local_dir=${dir}`,
        'trainer.total_training_steps=1',
      ]),
    ).toBe(0);
    const [step] = (await runMetrics(dir)).filter((m) => m.data['actor/pg_loss'] !== undefined);
    for (const key of ['actor/pg_loss', 'actor/kl_loss', 'actor/grad_norm'])
      expect(Number.isFinite(step.data[key]), key).toBe(true);
  });
});
