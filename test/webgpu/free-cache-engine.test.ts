// actor_rollout_ref.rollout.free_cache_engine (verl's sleep mode): the rollout's decoders and its bf16 copy of the
// actor are freed after every rollout and validation generation and made again at the next, the forwards' and
// updates' activations freed before it. Nothing the run computes may change: the same seed with and without gives the
// same metrics at every step (rollout and validation scores, losses, KL, rollout_corr/*) and byte-equal checkpoints,
// through 3 steps of GAE with a critic and a reference (KL in reward) and a validation between steps; also under bf16
// mixed precision, whose compute copy the rollout decodes from and must leave allocated. The freed buffers do show:
// the freeing run's measured peak is lower. Under LoRA on a float32 base the bf16 copy is of the frozen base: the
// memory plan keeps it between rollouts where that raises no peak, so it is converted once, not at every rollout.
import { describe, it, expect, vi } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../ppo/jobs/ppo-job-node.ts';
import { Engine, type KernelSpec } from '../../engine/index.ts';
import { RolloutGenerator } from '../../ppo/phases/rollout.ts';
import { PpoTrainer } from '../../ppo/trainer.ts';
import { makeTinyRun, runMetrics } from '../support/tiny-run.ts';

const CHECKPOINT_FILES = [
  'actor/model.safetensors',
  'critic/model.safetensors',
  'actor/optimizer.safetensors',
  'critic/optimizer.safetensors',
];

/** A line's metrics less its clock readings (timings, throughputs). */
function withoutTimings({ data }: { data: Record<string, number> }): Record<string, number> {
  return Object.fromEntries(
    Object.entries(data).filter(
      ([key]) => !key.startsWith('timing_s/') && !key.startsWith('perf/') && !key.endsWith('_per_s'),
    ),
  );
}

describe('rollout.free_cache_engine', () => {
  for (const { what, keys } of [
    { what: 'its own bf16 copy of the actor', keys: [] },
    // Mixed precision in the rollout's dtype: the rollout decodes from the actor's compute copy and must not free it.
    { what: "the actor's bf16 compute copy", keys: ['actor_rollout_ref.actor.fsdp_config.dtype=bfloat16'] },
  ])
    it(`frees and remakes the rollout between steps with bit-identical metrics and checkpoints (${what})`, async () => {
      const { root, overrides } = await makeTinyRun();
      const train = overrides.find((o) => o.startsWith('data.train_files='))!.split('=')[1];
      const common = [
        ...overrides,
        'algorithm.use_kl_in_reward=true',
        'actor_rollout_ref.rollout.dtype=bfloat16',
        `data.val_files=${train}`,
        'trainer.test_freq=2',
        'trainer.save_freq=1',
        'trainer.total_training_steps=3',
        ...keys,
      ];
      const run = async (free: boolean) => {
        const dir = join(root, free ? 'free' : 'kept');
        expect(
          await main([
            ...common,
            `actor_rollout_ref.rollout.free_cache_engine=${free}`,
            `trainer.default_local_dir=${dir}`,
          ]),
        ).toBe(0);
        return { dir, lines: await runMetrics(dir) };
      };
      const kept = await run(false);
      const free = await run(true);
      const keptLines = kept.lines.map(withoutTimings);
      expect(keptLines.filter((m) => m['critic/score/mean'] !== undefined)).toHaveLength(3);
      expect(keptLines.some((m) => Object.keys(m).some((k) => k.startsWith('val-core/')))).toBe(true);
      expect(free.lines.map(withoutTimings)).toEqual(keptLines);
      for (const step of [1, 2, 3])
        for (const file of CHECKPOINT_FILES) {
          const want = await readFile(join(kept.dir, `global_step_${step}`, file));
          const got = await readFile(join(free.dir, `global_step_${step}`, file));
          expect(Buffer.compare(got, want), `step ${step} ${file}`).toBe(0);
        }
      const peak = (lines: typeof kept.lines) =>
        Math.max(...lines.map((m) => m.data['perf/max_memory_allocated_gb'] ?? 0));
      expect(peak(free.lines)).toBeLessThan(peak(kept.lines));
    }, 600_000);

  it('keeps the bf16 copy of a frozen LoRA base between rollouts: converted once, the same metrics as never freeing', async () => {
    const { root, overrides } = await makeTinyRun();
    const train = overrides.find((o) => o.startsWith('data.train_files='))!.split('=')[1];
    const common = [
      ...overrides,
      'actor_rollout_ref.model.lora_rank=8',
      'actor_rollout_ref.actor.use_kl_loss=true',
      'actor_rollout_ref.rollout.dtype=bfloat16',
      `data.val_files=${train}`,
      'trainer.test_freq=2',
      'trainer.total_training_steps=3',
      'trainer.logger=[console,file]',
    ];
    /** The run's metric lines, its printed plan, and the float32 → bf16 conversions (to-half dispatches) made during
     *  each rollout (validation ones included). */
    const run = async (name: string, keys: string[]) => {
      const dir = join(root, name);
      const perRollout: number[] = [];
      let conversions = 0;
      const dispatch = Engine.prototype.dispatch;
      const generate = RolloutGenerator.prototype.generate;
      const spies = [
        vi.spyOn(Engine.prototype, 'dispatch').mockImplementation(function (this: Engine, spec, args) {
          if ((spec as KernelSpec).name.startsWith('to-half/')) conversions++;
          return dispatch.call(this, spec, args);
        }),
        vi.spyOn(RolloutGenerator.prototype, 'generate').mockImplementation(async function (
          this: RolloutGenerator,
          ...args
        ) {
          const before = conversions;
          const batch = await generate.apply(this, args);
          perRollout.push(conversions - before);
          return batch;
        }),
      ];
      const log = vi.spyOn(console, 'log');
      try {
        expect(await main([...common, ...keys, `trainer.default_local_dir=${dir}`])).toBe(0);
        const printed = log.mock.calls.map((c) => c.join(' ')).join('\n');
        return { lines: (await runMetrics(dir)).map(withoutTimings), perRollout, printed };
      } finally {
        for (const spy of [...spies, log]) spy.mockRestore();
      }
    };
    const never = await run('never-freed', ['actor_rollout_ref.rollout.free_cache_engine=false']);
    const kept = await run('kept', []);
    // The copy's conversions: one per bf16 matrix of the base (norms are copied as float32, no to-half).
    const matrices = never.perRollout[0];
    expect(matrices).toBeGreaterThan(0);
    // Three steps' rollouts and the validations after steps 2 and 3: converted at the first only, with and without
    // free_cache_engine (validation, which frees the decoders whatever the key says, keeps the copy too).
    expect(never.perRollout).toEqual([matrices, 0, 0, 0, 0]);
    expect(kept.perRollout).toEqual(never.perRollout);
    expect(kept.printed).toMatch(/rollout copy of the actor \(bf16 matrices\), kept: its base is frozen/);
    expect(kept.lines).toEqual(never.lines);
    // Freed with the decoders (as before, and where the plan says keeping would raise the peak): converted again at
    // every rollout, the same metrics.
    const keep = vi.spyOn(PpoTrainer.prototype, 'keepFrozenRolloutCopy').mockImplementation(() => {});
    try {
      const freed = await run('freed', []);
      expect(freed.perRollout).toEqual(kept.perRollout.map(() => matrices));
      expect(freed.lines).toEqual(never.lines);
    } finally {
      keep.mockRestore();
    }
  }, 600_000);
});
