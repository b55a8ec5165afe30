// verl 1dda039b's new training knobs in a real (tiny) run: each setting composes, trains a step with finite metrics,
// and changes the update when its knob changes — the same seed and data with the knob at two values give different
// actor losses. Two PPO epochs, so the second sees a policy that has moved (DRO's penalty and DPPO's trust region
// act only off-policy). The reward is a two-component dict a random model earns in varying amounts (digits written,
// a 7 among them), so groups have advantages and GDPO has two keys to normalise apart.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

const ACTOR = 'actor_rollout_ref.actor';

async function stepMetrics(settings: string[]): Promise<Record<string, number>> {
  const { root, overrides } = await makeTinyRun();
  const dir = join(root, 'run');
  const rewardModule = join(root, 'two-rewards.mjs');
  await writeFile(
    rewardModule,
    'export function compute_score(dataSource, solution) {\n' +
      '  const format_reward = (solution.match(/[0-9]/g) ?? []).length / 3;\n' +
      "  const accuracy_reward = solution.includes('7') ? 1 : 0;\n" +
      '  return { score: format_reward + accuracy_reward, format_reward, accuracy_reward };\n}\n',
  );
  expect(
    await main([
      ...overrides,
      `custom_reward_function.path=${rewardModule}`,
      'algorithm.adv_estimator=grpo',
      'actor_rollout_ref.rollout.n=4',
      `${ACTOR}.ppo_epochs=2`,
      `${ACTOR}.optim.lr=0.05`,
      ...settings,
      'trainer.total_training_steps=1',
      `trainer.default_local_dir=${dir}`,
    ]),
  ).toBe(0);
  const steps = (await runMetrics(dir)).map((l) => l.data).filter((m) => m['critic/score/mean'] !== undefined);
  expect(steps).toHaveLength(1);
  for (const [key, value] of Object.entries(steps[0])) expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
  return steps[0];
}

const KNOBS: [string, string[], string[], string][] = [
  [
    'policy_loss.dro_beta 0.01 vs 1.0',
    [`${ACTOR}.policy_loss.loss_mode=dro`, `${ACTOR}.policy_loss.dro_beta=0.01`],
    [`${ACTOR}.policy_loss.loss_mode=dro`, `${ACTOR}.policy_loss.dro_beta=1.0`],
    'actor/pg_loss',
  ],
  ['loss_mode dppo_tv vs vanilla', [`${ACTOR}.policy_loss.loss_mode=dppo_tv`], [], 'actor/pg_loss'],
  // DPPO's thresholds bound how far a token's probability moves; a tiny one masks the moved tokens.
  [
    'dppo_tv: clip_ratio_low/high (TV thresholds) 1e-7 vs 0.2',
    [`${ACTOR}.policy_loss.loss_mode=dppo_tv`, `${ACTOR}.clip_ratio_low=1e-7`, `${ACTOR}.clip_ratio_high=1e-7`],
    [`${ACTOR}.policy_loss.loss_mode=dppo_tv`],
    'actor/pg_clipfrac',
  ],
  [
    'dppo_kl: clip_ratio_low/high (binary-KL thresholds) 1e-12 vs 0.2',
    [`${ACTOR}.policy_loss.loss_mode=dppo_kl`, `${ACTOR}.clip_ratio_low=1e-12`, `${ACTOR}.clip_ratio_high=1e-12`],
    [`${ACTOR}.policy_loss.loss_mode=dppo_kl`],
    'actor/pg_clipfrac',
  ],
  ['loss_agg_mode token-sum vs token-mean', [`${ACTOR}.loss_agg_mode=token-sum`], [], 'actor/pg_loss'],
  [
    'seq-mean-token-sum-norm: loss_scale_factor 4 vs its default',
    [`${ACTOR}.loss_agg_mode=seq-mean-token-sum-norm`, `${ACTOR}.loss_scale_factor=4`],
    [`${ACTOR}.loss_agg_mode=seq-mean-token-sum-norm`],
    'actor/pg_loss',
  ],
  [
    'adv_estimator gdpo (two reward keys) vs grpo',
    ['algorithm.adv_estimator=gdpo', 'algorithm.gdpo_reward_keys=[format_reward,accuracy_reward]'],
    [],
    'actor/pg_loss',
  ],
];

describe("verl 1dda039b's knobs change training", () => {
  for (const [name, a, b, metric] of KNOBS) {
    it(name, async () => {
      const [ma, mb] = [await stepMetrics(a), await stepMetrics(b)];
      expect(ma[metric]).toBeDefined();
      expect(ma[metric], `${metric}: ${ma[metric]} vs ${mb[metric]}`).not.toBeCloseTo(mb[metric], 6);
    }, 600_000);
  }
});
