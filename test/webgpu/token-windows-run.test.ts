// train.js with sequences whose q/k/v are above one binding (WEBGPU_MAX_BINDING_BYTES=32 KiB): the experience pads
// responses to data.max_response_length = 240, so each of the tiny model's sequences is 246 tokens and its fused
// q/k/v 246 × 64 floats = 61.5 KiB; the old log-probs, the reference's forward and the actor update run every
// row-wise op over windows of rows and attention over windows of each sequence's queries (models/row-chunks.ts,
// models/attention-windows.ts), against its keys gathered into 246 × 16 floats (15.4 KiB); the step finishes. On main
// before this change it failed at the old log-probs' first dispatch ("kernel embedding/forward-vec4: binding out
// (tensor trunk.infer.a.input, [492, 32]) spans 62976 bytes but this device binds at most 32768 bytes").
import { describe, it, expect, vi, afterEach } from 'vitest';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { join } from 'node:path';

const BINDING = 32 * 1024;

describe('token windows in a run', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('a GRPO step whose sequences are above one binding finishes, every loss finite', async () => {
    const { root, overrides } = await makeTinyRun();
    vi.stubEnv('WEBGPU_MAX_BINDING_BYTES', String(BINDING));
    const dir = join(root, 'run');
    expect(
      await main([
        ...overrides,
        'algorithm.adv_estimator=grpo',
        'actor_rollout_ref.rollout.n=2',
        'data.max_response_length=240',
        'actor_rollout_ref.actor.ppo_mini_batch_size=4',
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2',
        'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2',
        'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2',
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
