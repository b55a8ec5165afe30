// A run killed after step 2 and resumed continues bit-identically to an uninterrupted run, across epoch
// boundaries (6 prompts, batches of 4: every step starts a new epoch) and with a reference model (KL in reward);
// also under AdamW8bit, whose 8-bit moments (codes and block scales) must reload bit for bit; and across
// fsdp_config.optimizer_offload (actor and critic): an offloaded run's checkpoints equal the resident run's byte for
// byte, and a checkpoint of either resumes in the other bit-identically.
import { describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

function withoutTimings({ data: metrics }: { data: Record<string, number> }): Record<string, number> {
  for (const key of Object.keys(metrics))
    if (key.startsWith('timing_s/') || key.startsWith('perf/')) delete metrics[key];
  return metrics;
}

const ADAMW_8BIT = ['actor_rollout_ref.actor', 'critic'].flatMap((role) => [
  `${role}.optim.optimizer=AdamW8bit`,
  `${role}.optim.optimizer_impl=bitsandbytes.optim`,
]);

const OFFLOAD = ['actor_rollout_ref.actor', 'critic.model'].map((role) => `${role}.fsdp_config.optimizer_offload=true`);
const CHECKPOINT_FILES = [
  'actor/model.safetensors',
  'critic/model.safetensors',
  'actor/optimizer.safetensors',
  'critic/optimizer.safetensors',
];
const metrics = async (dir: string) => (await runMetrics(dir)).map(withoutTimings);
const stepLines = (lines: Record<string, number>[]) => lines.filter((m) => m['critic/score/mean'] !== undefined);

describe('resume', () => {
  for (const { what, optimizer } of [
    { what: '', optimizer: [] },
    { what: ' (AdamW8bit, actor and critic)', optimizer: ADAMW_8BIT },
  ])
    it(`continues bit-identically after a restart across epoch boundaries${what}`, async () => {
      const { root, overrides } = await makeTinyRun();
      const common = [
        ...overrides,
        ...optimizer,
        'algorithm.use_kl_in_reward=true',
        'algorithm.kl_ctrl.type=adaptive',
        'actor_rollout_ref.actor.shuffle=true',
        'trainer.save_freq=1',
      ];
      const a = join(root, 'a');
      const b = join(root, 'b');
      expect(await main([...common, `trainer.default_local_dir=${a}`, 'trainer.total_training_steps=3'])).toBe(0);
      expect(await main([...common, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=2'])).toBe(0);
      expect(await main([...common, `trainer.default_local_dir=${b}`, 'trainer.total_training_steps=3'])).toBe(0);

      expect(stepLines(await metrics(b))).toEqual(stepLines(await metrics(a)));
      for (const file of CHECKPOINT_FILES) {
        const fromA = await readFile(join(a, 'global_step_3', file));
        const fromB = await readFile(join(b, 'global_step_3', file));
        expect(Buffer.compare(fromA, fromB), file).toBe(0);
        if (optimizer.length > 0 && file.endsWith('optimizer.safetensors'))
          expect(fromA.subarray(0, 4096).toString('latin1'), file).toMatch(/"state1\.[^"]+":\{"dtype":"I32"/);
      }
    }, 600_000);

  for (const { what, optimizer } of [
    { what: 'AdamW', optimizer: [] },
    { what: 'AdamW8bit', optimizer: ADAMW_8BIT },
  ])
    it(`optimizer offload (${what}, actor and critic): equal checkpoints, and each resumes in the other`, async () => {
      const { root, overrides } = await makeTinyRun();
      const common = [...overrides, ...optimizer, 'algorithm.use_kl_in_reward=true', 'trainer.save_freq=1'];
      const run = (dir: string, steps: number, offload: boolean) =>
        main([
          ...common,
          ...(offload ? OFFLOAD : []),
          `trainer.default_local_dir=${join(root, dir)}`,
          `trainer.total_training_steps=${steps}`,
        ]);
      // resident: 3 steps uninterrupted; residentFirst: 2 resident, then offloaded; offloadFirst: the reverse.
      expect(await run('resident', 3, false)).toBe(0);
      for (const [dir, offloadFirst] of [
        ['residentFirst', false],
        ['offloadFirst', true],
      ] as const) {
        expect(await run(dir, 2, offloadFirst)).toBe(0);
        expect(await run(dir, 3, !offloadFirst)).toBe(0);
      }
      const expected = stepLines(await metrics(join(root, 'resident')));
      expect(expected).toHaveLength(3);
      for (const dir of ['residentFirst', 'offloadFirst']) {
        expect(stepLines(await metrics(join(root, dir))), dir).toEqual(expected);
        for (const step of [2, 3])
          for (const file of CHECKPOINT_FILES) {
            const want = await readFile(join(root, 'resident', `global_step_${step}`, file));
            const got = await readFile(join(root, dir, `global_step_${step}`, file));
            expect(Buffer.compare(got, want), `${dir} step ${step} ${file}`).toBe(0);
          }
      }
    }, 600_000);
});
