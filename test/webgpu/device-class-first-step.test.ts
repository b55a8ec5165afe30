// The default job's first PPO step under both device classes in one process (WEBGPU_DEVICE_CLASS=cpu and =gpu:
// two engines on the same adapter, each choosing its class's kernel variants), from the job's warm-started actor
// (the browser demo's shipped checkpoint, with its data.seed). The variants sum in different orders (a CPU
// variant walks K in one lane; a GPU variant splits it over lanes and tiles and reduces in a tree), so the
// numbers are not bit-identical; they must agree to float32 rounding. (The checkpoint is the warm start stored in
// bf16, so this is the default job's first step up to that rounding of the starting weights.)
import { describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readKnobs } from '../../engine/index.ts';
import { runCli } from '../support/run-cli.ts';
import { runMetrics } from '../support/tiny-run.ts';
import { DEFAULT_JOB } from '../../ppo/tasks/default-job.ts';
import { SHIPPED_CHECKPOINT_PATH } from '../../demo/src/shipped-checkpoint.ts';
import { makeTempDir } from '../support/temp-dir.ts';

/** The step's draws: both classes must sample the same responses (a draw flips only on a near-tie of two
 *  Gumbel-perturbed logits, far rarer than once in the step's 128 × 5 tokens at float32 rounding). */
const SAME_SAMPLES = ['critic/score/mean', 'response_length/mean', 'actor/pg_clipfrac'];
/** The numbers every kernel of the step feeds: values and GAE, both updates' losses, KL and gradient norms. */
const ROUNDING_CLOSE = [
  'critic/values/mean',
  'critic/advantages/mean',
  'critic/returns/mean',
  'actor/entropy',
  'actor/pg_loss',
  'actor/ppo_kl',
  'actor/grad_norm',
  'critic/vf_loss',
  'critic/grad_norm',
];
// Float32 rounding of sums over the step's tokens and parameters, with room: measured differences are at most
// 6e-8 absolute (losses, KL, advantages, whose terms are O(1)) and 2e-7 relative (gradient norms). A wrong variant
// misses by orders of magnitude more.
const ABSOLUTE = 1e-6;
const RELATIVE = 1e-5;

async function firstStep(deviceClass: 'cpu' | 'gpu'): Promise<Record<string, number>> {
  const { dataSeed } = JSON.parse(await readFile(join(SHIPPED_CHECKPOINT_PATH, 'warm_start.json'), 'utf8')) as {
    dataSeed: number;
  };
  const dir = await makeTempDir(`first-step-${deviceClass}-`);
  const knobs = readKnobs({ ...process.env, WEBGPU_DEVICE_CLASS: deviceClass });
  const { code, stderr } = await runCli(
    [
      '--config',
      DEFAULT_JOB.source,
      `actor_rollout_ref.model.path=${SHIPPED_CHECKPOINT_PATH}`,
      `data.seed=${dataSeed}`,
      'trainer.total_training_steps=1',
      'trainer.val_before_train=false',
      'trainer.test_freq=-1',
      'trainer.save_freq=-1',
      'trainer.logger=[file]',
      `trainer.default_local_dir=${dir}`,
    ],
    {},
    { knobs },
  );
  expect(code, stderr).toBe(0);
  return (await runMetrics(dir)).map((line) => line.data).find((m) => m['critic/score/mean'] !== undefined)!;
}

describe('device classes', () => {
  it("the default job's first PPO step: the same samples, and losses, KL and gradient norms equal to float32 " +
    'rounding', async () => {
    const cpu = await firstStep('cpu');
    const gpu = await firstStep('gpu');
    for (const key of SAME_SAMPLES) expect(gpu[key], key).toBe(cpu[key]);
    for (const key of ROUNDING_CLOSE) {
      expect(Number.isFinite(cpu[key]), `${key} = ${cpu[key]}`).toBe(true);
      expect(Math.abs(gpu[key] - cpu[key]), `${key}: cpu ${cpu[key]}, gpu ${gpu[key]}`).toBeLessThanOrEqual(
        ABSOLUTE + RELATIVE * Math.abs(cpu[key]),
      );
    }
  }, 600_000);
});
