// algorithm.adv_estimator=optimal_token_baseline and tir_optimal_token_baseline with actor.calculate_sum_pi_squared in
// whole runs of the tiny model: the old-log-prob forward is recomputed and gives Σπ² per response token, the
// advantages the trainer used are the estimator's CPU reference (kernels/ppo/optimal-token-baseline.ref.ts) on that
// step's own Σπ², old log-probs, rewards and mask (with rollout_is: on its importance weights too), and the step logs
// verl's variance_proxy/*. The multi-turn estimator runs on Search-R1 rollouts, whose masks have observation gaps.
import { describe, it, expect, vi } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { ExperienceMaker, type Experience } from '../../ppo/phases/experience.ts';
import {
  computeOptimalTokenBaselineRef,
  computeMultiTurnOptimalTokenBaselineRef,
} from '../../kernels/ppo/optimal-token-baseline.ref.ts';
import { varianceProxyMetrics } from '../../ppo/metrics/variance-proxy.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { expectClose } from '../support/arrays.ts';

type Estimator = 'optimal_token_baseline' | 'tir_optimal_token_baseline';

/** Runs two steps, recording each call of ExperienceMaker.advantages (its IS weights passed through `weights`);
 *  tir_optimal_token_baseline on the Search-R1 task (two turns, BM25 observations masked out between them). */
async function otbRun(
  estimator: Estimator,
  extra: string[],
  weights: (w: Float32Array | null) => Float32Array | null = (w) => w,
) {
  const search = estimator === 'tir_optimal_token_baseline';
  const { root, overrides } = await makeTinyRun(search ? 8 : 6, search ? 'search_qa' : 'arithmetic');
  const task = search
    ? [
        'do_search=true',
        `retriever.corpus_path=${join(root, 'corpus.jsonl')}`,
        'retriever.topk=2',
        'max_turns=2',
        'data.max_response_length=20',
        'data.max_obs_length=8',
        'actor_rollout_ref.rollout.temperature=1.5',
      ]
    : ['data.max_response_length=5'];
  // Rewards that differ within a group, so the baseline has something to weigh.
  const reward = join(root, 'length-reward.mjs');
  await writeFile(reward, 'export function compute_score(source, text) { return (text.length % 3) - 0.5; }\n');
  const dir = join(root, 'run');
  const original = ExperienceMaker.prototype.advantages;
  const calls: { experience: Experience; isWeights: Float32Array | null }[] = [];
  const spy = vi.spyOn(ExperienceMaker.prototype, 'advantages').mockImplementation(async function (
    this: ExperienceMaker,
    x,
    plan,
    baselines,
    isWeights,
  ) {
    const used = weights(isWeights ?? null);
    const experience = await original.call(this, x, plan, baselines, used);
    calls.push({ experience, isWeights: used });
    return experience;
  });
  try {
    expect(
      await main([
        ...overrides,
        ...task,
        `custom_reward_function.path=${reward}`,
        'actor_rollout_ref.rollout.n=2',
        `algorithm.adv_estimator=${estimator}`,
        'actor_rollout_ref.actor.calculate_sum_pi_squared=True',
        ...extra,
        'trainer.total_training_steps=2',
        `trainer.default_local_dir=${dir}`,
      ]),
    ).toBe(0);
  } finally {
    spy.mockRestore();
  }
  const steps = (await runMetrics(dir)).map((l) => l.data).filter((m) => m['critic/score/mean'] !== undefined);
  return { steps, calls };
}

/**
 * An estimator's CPU reference on a step's own inputs, with verl's default handle_zero_tail (true for both since
 * 1dda039b) unless given.
 */
function reference(estimator: Estimator, x: Experience, isWeights: Float32Array | null, handleZeroTail = true) {
  expect(x.sumPiSquared).not.toBeNull();
  const compute =
    estimator === 'optimal_token_baseline' ? computeOptimalTokenBaselineRef : computeMultiTurnOptimalTokenBaselineRef;
  return compute({
    tokenLevelRewards: x.tokenLevelRewards,
    responseMask: x.responseMask,
    groupOf: x.rollout.groupIds,
    oldLogProbs: x.oldLogProbs,
    sumPiSquared: x.sumPiSquared!,
    rolloutIsWeights: isWeights ?? undefined,
    handleZeroTail,
    epsilon: 1e-8,
    B: x.N,
    T: x.R,
  });
}

/** The advantages the trainer used against the CPU reference on the step's own inputs. */
function expectReferenceAdvantages(
  estimator: Estimator,
  { experience: x, isWeights }: { experience: Experience; isWeights: Float32Array | null },
): Float64Array {
  const expected = reference(estimator, x, isWeights);
  expectClose(x.advantages, expected.advantages, 1e-5, 1e-4, 'advantages');
  expectClose(x.returns, expected.returns, 1e-6, 1e-6, 'returns');
  return expected.advantages;
}

describe('optimal_token_baseline in a run', () => {
  it("recomputes old log-probs with Σπ², uses the estimator's reference advantages, logs finite " +
    'variance_proxy/*', async () => {
    const { steps, calls } = await otbRun('optimal_token_baseline', []);
    expect(steps).toHaveLength(2);
    expect(calls).toHaveLength(2);
    for (const [i, step] of steps.entries()) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      expect(step['timing_s/old_log_prob']).toBeGreaterThanOrEqual(0);
      const x = calls[i].experience;
      expectReferenceAdvantages('optimal_token_baseline', calls[i]);
      expect(x.advantages.some((a) => a !== 0)).toBe(true);
      // Σπ² of the same forward as the old log-probs: π(target)² ≤ Σπ² ≤ 1 on every response token.
      x.responseMask.forEach((m, k) => {
        if (!m) return;
        expect(x.sumPiSquared![k]).toBeLessThanOrEqual(1 + 1e-6);
        expect(x.sumPiSquared![k]).toBeGreaterThanOrEqual(Math.exp(2 * x.oldLogProbs[k]) * (1 - 1e-5));
      });
      const expected = varianceProxyMetrics(
        { ...x, sumPiSquared: x.sumPiSquared!, rolloutIsWeights: null },
        step['actor/grad_norm'],
      );
      for (const [key, value] of Object.entries(expected)) expect(step[key], key).toBeCloseTo(value, 6);
      expect(step['variance_proxy/proxy1_signal_strength']).toBeGreaterThan(0);
    }
  }, 300_000);

  it("with rollout_is=token the estimator reads the step's importance weights, as verl passes " +
    'rollout_is_weights', async () => {
    // The decode kernels and the training forward agree to float32 noise (weights ≈ 1): the test scales them
    // unevenly on their way in, so advantages that ignored them would differ from the reference.
    const { steps, calls } = await otbRun(
      'optimal_token_baseline',
      ['actor_rollout_ref.rollout.calculate_log_probs=true', 'algorithm.rollout_correction.rollout_is=token'],
      (w) => (w === null ? null : w.map((v, k) => v * (1 + (k % 3) * 0.5))),
    );
    expect(steps).toHaveLength(2);
    for (const [i, step] of steps.entries()) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      expect(step['rollout_corr/rollout_is_mean']).toBeDefined();
      const { experience: x, isWeights } = calls[i];
      expect(isWeights).not.toBeNull();
      const withWeights = expectReferenceAdvantages('optimal_token_baseline', calls[i]);
      const unweighted = reference('optimal_token_baseline', x, null).advantages;
      expect(withWeights.some((a, k) => Math.abs(a - unweighted[k]) > 1e-3)).toBe(true);
    }
  }, 300_000);

  it('tir_optimal_token_baseline on Search-R1 rollouts: the multi-turn reference, not the single-turn one, on masks ' +
    'with observation gaps', async () => {
    const { steps, calls } = await otbRun('tir_optimal_token_baseline', []);
    expect(steps).toHaveLength(2);
    expect(calls).toHaveLength(2);
    let gapped = 0;
    for (const [i, step] of steps.entries()) {
      for (const [key, value] of Object.entries(step)) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      expect(step['env/observation_token_share']).toBeGreaterThan(0);
      const x = calls[i].experience;
      // Rows whose mask has a 0 between two 1s: an observation the model went on after.
      for (let b = 0; b < x.N; b++) {
        const row = Array.from(x.responseMask.subarray(b * x.R, (b + 1) * x.R));
        if (row.slice(row.indexOf(1), row.lastIndexOf(1)).includes(0)) gapped++;
      }
      const used = expectReferenceAdvantages('tir_optimal_token_baseline', calls[i]);
      expect(x.advantages.some((a) => a !== 0)).toBe(true);
      // A silent fallback to optimal_token_baseline (with either handle_zero_tail) would give these.
      for (const handleZeroTail of [false, true]) {
        const otb = reference('optimal_token_baseline', x, null, handleZeroTail).advantages;
        expect(
          used.some((a, k) => Math.abs(a - otb[k]) > 1e-3),
          `optimal_token_baseline, handle_zero_tail=${handleZeroTail}`,
        ).toBe(true);
      }
    }
    expect(gapped).toBeGreaterThan(0);
  }, 300_000);
});
