// algorithm.rollout_correction.rollout_is with the policy losses whose weighting is not a rescaling of the advantages
// (geo_mean, clip_cov, kl_cov), in whole runs of the tiny model. The sampler's log-probs are shifted after the
// old-log-prob forward so the importance weights stay far from 1; then every actor micro-batch's loss and gradient
// must be the float64 reference's with those weights (computed here from the step's own log-probs), on the
// micro-batch's own log-probs, entropies and token pick, and must differ from the unweighted reference's. kl_cov's
// pick must come from the plain advantages, as verl's.
import { describe, it, expect, vi } from 'vitest';
import { join } from 'node:path';
import type { Engine, Tensor } from '../../engine/index.ts';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { ExperienceMaker, type Experience, type ExperienceBatch } from '../../ppo/phases/experience.ts';
import { ActorUpdater, type ActorUpdateConfig } from '../../ppo/phases/actor-update.ts';
import type { MicroBatch } from '../../ppo/training/update-loop.ts';
import { rolloutIsWeights } from '../../ppo/algorithm/rollout-correction.ts';
import { responseRows } from '../../ppo/training/batch-rows.ts';
import { computeActorLossRef } from '../../kernels/ppo/policy-loss.ref.ts';
import { selectCovarianceTokens } from '../../kernels/ppo/covariance-selection.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';
import { expectClose } from '../support/arrays.ts';

type LossAndBackward = (
  x: Experience,
  config: ActorUpdateConfig,
  micro: MicroBatch,
  ...rest: unknown[]
) => Promise<void>;

interface MicroBatchCheck {
  /** The kernel's pg_loss and policy_loss, then d loss / d log_prob per token. */
  got: { losses: number[]; grad: Float32Array };
  weighted: { losses: number[]; grad: Float64Array };
  plain: { losses: number[]; grad: Float64Array };
  /** kl_cov: the trainer's pick and the pick from the plain advantages. */
  pick?: { got: Float32Array; plain: Float32Array };
}

async function weightedRun(level: 'token' | 'sequence', settings: string[]) {
  const { root, overrides } = await makeTinyRun();
  const dir = join(root, 'run');
  const recompute = ExperienceMaker.prototype.recomputeOldLogProbs;
  const shift = vi.spyOn(ExperienceMaker.prototype, 'recomputeOldLogProbs').mockImplementation(async function (
    this: ExperienceMaker,
    x: ExperienceBatch,
    ...rest
  ) {
    await recompute.call(this, x, ...rest);
    x.rolloutLogProbs = x.rolloutLogProbs!.map((v, i) => v + 0.4 * Math.sin(1.3 * i + 0.5));
  });
  const updater = ActorUpdater.prototype as unknown as { lossAndBackward: LossAndBackward };
  const lossAndBackward = updater.lossAndBackward;
  const checks: MicroBatchCheck[] = [];
  const spy = vi.spyOn(updater, 'lossAndBackward').mockImplementation(async function (
    this: ActorUpdater,
    x,
    config,
    micro,
    ...rest
  ) {
    await lossAndBackward.call(this, x, config, micro, ...rest);
    checks.push(await checkMicroBatch((this as unknown as { engine: Engine }).engine, x, config, micro, level));
  });
  try {
    expect(
      await main([
        ...overrides,
        'actor_rollout_ref.rollout.calculate_log_probs=true',
        `algorithm.rollout_correction.rollout_is=${level}`,
        ...settings,
        'trainer.total_training_steps=1',
        `trainer.default_local_dir=${dir}`,
      ]),
    ).toBe(0);
  } finally {
    spy.mockRestore();
    shift.mockRestore();
  }
  const steps = (await runMetrics(dir)).map((l) => l.data).filter((m) => m['critic/score/mean'] !== undefined);
  return { steps, checks };
}

async function checkMicroBatch(
  engine: Engine,
  x: Experience,
  config: ActorUpdateConfig,
  micro: MicroBatch,
  level: 'token' | 'sequence',
): Promise<MicroBatchCheck> {
  const { buffers: b, rows } = micro;
  const m = rows.length;
  const pick = (all: Float32Array) => responseRows(all, x.R, rows, b.R);
  const read = async (t: Tensor, width = 1) => (await engine.read(t)).slice(0, m * b.R * width) as Float32Array;
  const weights = rolloutIsWeights(
    x.oldLogProbs,
    x.rolloutLogProbs!,
    x.responseMask,
    x.N,
    x.R,
    level,
    2,
    false,
  ).weights;
  const logProb = await read(b.logProbs);
  const lossMode = config.policyLoss.lossMode;
  const covariance = lossMode === 'clip_cov' || lossMode === 'kl_cov';
  const selected = covariance ? await read(b.tokenFlags) : undefined;
  const inputs = {
    oldLogProb: pick(x.oldLogProbs),
    logProb,
    advantages: pick(x.advantages),
    responseMask: pick(x.responseMask),
    B: m,
    T: b.R,
    config: config.policyLoss,
    aggregation: micro.aggregation,
    selected,
    geoMeanRows: micro.miniBatchRows.length,
    terms: {
      entropyCoeff: config.entropyCoeff,
      entropy: await read(b.entropy),
      klLossCoef: config.klLossCoef,
      klLossType: config.klLossType,
    },
  };
  const summary = (r: ReturnType<typeof computeActorLossRef>) => ({
    losses: [r.pgLoss, r.policyLoss],
    grad: r.gradLogProb,
  });
  const out = await engine.read(b.actorOut);
  const grads = await read(b.actorGrads, 2);
  const check: MicroBatchCheck = {
    got: { losses: [out[0], out[7]], grad: grads.filter((_, i) => i % 2 === 0) },
    weighted: summary(computeActorLossRef({ ...inputs, isWeights: pick(weights) })),
    plain: summary(computeActorLossRef(inputs)),
  };
  if (lossMode === 'kl_cov') {
    const p = config.policyLoss;
    check.pick = {
      got: selected!,
      plain: selectCovarianceTokens(
        'kl_cov',
        {
          ...inputs,
          clipRatioLow: p.clipRatioLow,
          clipRatioHigh: p.clipRatioHigh,
          clipCovRatio: p.clipCovRatio!,
          clipCovLb: p.clipCovLb!,
          clipCovUb: p.clipCovUb!,
          klCovRatio: p.klCovRatio!,
        },
        (n) => Array.from({ length: n }, (_, i) => i),
      ),
    };
  }
  return check;
}

const RUNS: ['token' | 'sequence', string, string[]][] = [
  ['token', 'geo_mean', ['actor_rollout_ref.actor.policy_loss.loss_mode=geo_mean']],
  [
    'token',
    'clip_cov',
    [
      'actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov',
      'actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.2',
      'actor_rollout_ref.actor.policy_loss.clip_cov_lb=-1',
    ],
  ],
  [
    'token',
    'kl_cov',
    [
      'actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov',
      'actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.2',
      'actor_rollout_ref.actor.policy_loss.ppo_kl_coef=1',
    ],
  ],
  ['sequence', 'geo_mean', ['actor_rollout_ref.actor.policy_loss.loss_mode=geo_mean']],
];

describe('rollout_is with geo_mean, clip_cov and kl_cov in a run', () => {
  for (const [level, lossMode, settings] of RUNS) {
    it(`rollout_is=${level}, loss_mode=${lossMode}: each micro-batch's loss and gradient are verl's weighted ones; ` +
      `finite metrics`, async () => {
      const { steps, checks } = await weightedRun(level, settings);
      expect(steps).toHaveLength(1);
      for (const [key, value] of Object.entries(steps[0]))
        expect(Number.isFinite(value), `${key} = ${value}`).toBe(true);
      expect(steps[0]['rollout_corr/rollout_is_std']).toBeGreaterThan(0.1);
      expect(checks.length).toBeGreaterThan(0);
      let moved = 0;
      for (const [i, c] of checks.entries()) {
        expectClose(c.got.losses, c.weighted.losses, 1e-5, 1e-4, `micro-batch ${i} pg_loss, policy_loss`);
        expectClose(c.got.grad, c.weighted.grad, 1e-6, 1e-4, `micro-batch ${i} d loss / d log_prob`);
        moved = Math.max(
          moved,
          ...c.weighted.grad.map((g, t) => Math.abs(g - c.plain.grad[t]) / (1e-6 + Math.abs(c.plain.grad[t]))),
        );
        if (c.pick) {
          expect(Array.from(c.pick.got)).toEqual(Array.from(c.pick.plain));
          expect(c.pick.plain.some((s) => s === 1)).toBe(true);
        }
      }
      // Weights ignored would leave the unweighted gradient: far from the weighted one on some token.
      expect(moved).toBeGreaterThan(0.1);
    }, 300_000);
  }
});
