// The policy loss a run is configured with is the one its actor update computes: from the same tiny model, data and
// seed, a run with loss_mode cispo or sapo logs a different actor/pg_loss from vanilla's (at the first mini-batch,
// whose ratio is 1, vanilla's token loss is −A, cispo's −A·log π and sapo's −A·2/τ under its own aggregation).
// test/cpu/policy-loss-modes.test.ts checks that every loss_mode reaches its kernel case; ppo-kernels.test.ts, each
// case's math.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics, type TinyRun } from '../support/tiny-run.ts';

/** The first step's actor/pg_loss of a one-step run with `settings`. */
async function firstPgLoss(tiny: TinyRun, name: string, settings: string[]): Promise<number> {
  const dir = join(tiny.root, name);
  const code = await main([
    ...tiny.overrides,
    ...settings,
    'trainer.total_training_steps=1',
    `trainer.default_local_dir=${dir}`,
  ]);
  expect(code).toBe(0);
  const steps = (await runMetrics(dir)).map((l) => l.data).filter((m) => m['actor/pg_loss'] !== undefined);
  expect(steps).toHaveLength(1);
  return steps[0]['actor/pg_loss'];
}

describe('loss_mode in a run', () => {
  it('cispo and sapo log a pg_loss other than vanilla at the same seed', async () => {
    const tiny = await makeTinyRun();
    const vanilla = await firstPgLoss(tiny, 'vanilla', []);
    const again = await firstPgLoss(tiny, 'vanilla-again', []);
    // The comparison means something only if the same run repeats its pg_loss.
    expect(again).toBe(vanilla);
    const cispo = await firstPgLoss(tiny, 'cispo', ['actor_rollout_ref.actor.policy_loss.loss_mode=cispo']);
    const sapo = await firstPgLoss(tiny, 'sapo', ['actor_rollout_ref.actor.policy_loss.loss_mode=sapo']);
    expect(Math.abs(vanilla)).toBeGreaterThan(1e-4);
    expect(Math.abs(cispo - vanilla)).toBeGreaterThan(1e-3 * Math.abs(vanilla));
    expect(Math.abs(sapo - vanilla)).toBeGreaterThan(1e-3 * Math.abs(vanilla));
  }, 300_000);
});
