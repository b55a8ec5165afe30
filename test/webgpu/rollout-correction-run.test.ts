// actor_rollout_ref.rollout.calculate_log_probs in a run: the training forward recomputes old log-probs, the
// sampler's are kept, and the step logs verl's rollout_corr/* drift metrics, finite and small (the fused decode
// kernels and the training forward compute the same float32 softmax by different schedules).
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

async function stepMetrics(settings: string[]): Promise<Record<string, number>[]> {
  const { root, overrides } = await makeTinyRun();
  const dir = join(root, 'run');
  expect(
    await main([...overrides, ...settings, 'trainer.total_training_steps=2', `trainer.default_local_dir=${dir}`]),
  ).toBe(0);
  return (await runMetrics(dir)).map((l) => l.data).filter((m) => m['critic/score/mean'] !== undefined);
}

describe('rollout.calculate_log_probs in a run', () => {
  it('logs finite rollout_corr/* drift metrics and times the old_log_prob phase', async () => {
    const steps = await stepMetrics(['actor_rollout_ref.rollout.calculate_log_probs=true']);
    expect(steps).toHaveLength(2);
    for (const step of steps) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      for (const key of ['kl', 'k3_kl', 'training_ppl', 'rollout_ppl', 'log_ppl_diff', 'chi2_token', 'chi2_seq']) {
        expect(step[`rollout_corr/${key}`], key).toBeDefined();
      }
      expect(Math.abs(step['rollout_corr/kl'])).toBeLessThan(1e-3);
      expect(Math.abs(step['rollout_corr/log_ppl_abs_diff'])).toBeLessThan(1e-3);
      expect(step['timing_s/old_log_prob']).toBeGreaterThanOrEqual(0);
    }
  }, 300_000);

  for (const level of ['token', 'sequence']) {
    it(`algorithm.rollout_correction.rollout_is=${level}: truncated importance weights on the policy loss, finite ` +
      `metrics`, async () => {
      const steps = await stepMetrics([
        'actor_rollout_ref.rollout.calculate_log_probs=true',
        `algorithm.rollout_correction.rollout_is=${level}`,
        'algorithm.rollout_correction.rollout_is_batch_normalize=true',
      ]);
      expect(steps).toHaveLength(2);
      for (const step of steps) {
        for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
        for (const key of [
          'rollout_is_mean',
          'rollout_is_eff_sample_size',
          'rollout_is_std',
          'rollout_is_seq_mean',
          'rollout_is_batch_norm_factor',
        ]) {
          expect(step[`rollout_corr/${key}`], key).toBeDefined();
        }
        // The decode kernels and the training forward agree to float32 noise: weights ≈ 1.
        expect(step['rollout_corr/rollout_is_mean']).toBeCloseTo(1, 3);
        expect(step['actor/pg_loss']).toBeDefined();
      }
    }, 300_000);
  }

  it("algorithm.rollout_correction.rollout_rs=token_k1,seq_max_k2 (verl's multi-RS example): per-option metrics, " +
    'finite', async () => {
    const steps = await stepMetrics([
      'actor_rollout_ref.rollout.calculate_log_probs=true',
      "algorithm.rollout_correction.rollout_rs='token_k1,seq_max_k2'",
      "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6,2.5'",
      'algorithm.rollout_correction.rollout_is=token',
    ]);
    expect(steps).toHaveLength(2);
    for (const step of steps) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      for (const option of ['token_k1', 'seq_max_k2']) {
        for (const key of ['mean', 'max', 'std', 'seq_mean', 'masked_fraction', 'seq_masked_fraction']) {
          expect(step[`rollout_corr/rollout_rs_${option}_${key}`], `${option}_${key}`).toBeDefined();
        }
        // Log-ratios ≈ 0 (float32 noise): every estimator stays far inside its bounds, nothing is rejected.
        expect(step[`rollout_corr/rollout_rs_${option}_masked_fraction`]).toBe(0);
        expect(Math.abs(step[`rollout_corr/rollout_rs_${option}_mean`])).toBeLessThan(1e-3);
      }
      expect(step['rollout_corr/rollout_rs_masked_fraction']).toBe(0);
    }
  }, 300_000);

  it("algorithm.rollout_correction.bypass_mode=true: the sampler's log-probs stay the old ones; the actor measures " +
    'the drift', async () => {
    const steps = await stepMetrics([
      'actor_rollout_ref.rollout.calculate_log_probs=true',
      'algorithm.rollout_correction.bypass_mode=true',
      'actor_rollout_ref.actor.ppo_mini_batch_size=4',
    ]);
    expect(steps).toHaveLength(2);
    for (const step of steps) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      expect(step['timing_s/old_log_prob']).toBeUndefined();
      // verl's bypass loss reports compute_offpolicy_metrics of the current policy against the rollout's, per
      // micro-batch; one mini-batch per step (of 4 prompts), so every micro-batch sees the rollout's own weights.
      expect(Math.abs(step['rollout_corr/kl'])).toBeLessThan(1e-3);
      expect(Object.keys(step).filter((k) => k.startsWith('rollout_corr/rollout_'))).toEqual([
        'rollout_corr/rollout_ppl',
        'rollout_corr/rollout_log_ppl',
      ]);
    }
  }, 300_000);

  // verl's examples/rollout_correction/run_with_rollout_corr.sh (RLOO, bypass reinforce with sequence IS, batch
  // normalized) with run_with_rollout_corr_multi_rs.sh's two rejection criteria added.
  it("bypass_mode with loss_type=reinforce, sequence IS and two rejection criteria: verl's metrics, " +
    'finite', async () => {
    const steps = await stepMetrics([
      'algorithm.adv_estimator=rloo',
      'actor_rollout_ref.rollout.n=2',
      'algorithm.rollout_correction.bypass_mode=true',
      'algorithm.rollout_correction.loss_type=reinforce',
      'algorithm.rollout_correction.rollout_is=sequence',
      'algorithm.rollout_correction.rollout_is_batch_normalize=true',
      "algorithm.rollout_correction.rollout_rs='token_k1,seq_max_k2'",
      "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6,2.5'",
    ]);
    expect(steps).toHaveLength(2);
    for (const step of steps) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      for (const key of [
        'rollout_is_mean',
        'rollout_is_batch_norm_factor',
        'rollout_rs_token_k1_mean',
        'rollout_rs_seq_max_k2_masked_fraction',
        'rollout_rs_masked_fraction',
        'kl',
        'chi2_seq',
      ]) {
        expect(step[`rollout_corr/${key}`], key).toBeDefined();
      }
      expect(step['rollout_corr/rollout_is_mean']).toBeCloseTo(1, 3);
      expect(step['rollout_corr/rollout_rs_masked_fraction']).toBe(0);
      expect(step['actor/pg_loss']).toBeDefined();
      expect(step['actor/pg_clipfrac']).toBe(0);
    }
  }, 300_000);

  it('is on by default as in verl 1dda039b, and off with calculate_log_probs=false: no recomputation, no ' +
    'rollout_corr/* metrics', async () => {
    const [byDefault] = await stepMetrics([]);
    expect(byDefault['timing_s/old_log_prob']).toBeGreaterThanOrEqual(0);
    expect(Number.isFinite(byDefault['rollout_corr/kl'])).toBe(true);
    const [off] = await stepMetrics(['actor_rollout_ref.rollout.calculate_log_probs=false']);
    expect(Object.keys(off).filter((k) => k.startsWith('rollout_corr/') || k === 'timing_s/old_log_prob')).toEqual([]);
  }, 300_000);
});
