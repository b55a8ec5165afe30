// `node tools/bench.js soak [--steps=2000] [--warmup=200] [--every=100]`: a long tiny PPO job (the built-in task with
// GRPO, n=4, validation every 100 steps and a checkpoint every 500) run as `node train.js` would run it, then, from its
// metrics.jsonl, device memory held, the peak, the process's resident set and the engine's caches every `every` steps,
// and the slope of each after `warmup` steps (least squares, per 1,000 steps). A leak shows as a slope well above
// zero; the figures go to docs/reliability.md.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { integerFlag } from './harness.ts';

const TRAIN_JS = fileURLToPath(new URL('../../train.js', import.meta.url));

const SAMPLED = {
  device_memory_gb: 'perf/memory_allocated_gb',
  peak_device_memory_gb: 'perf/max_memory_allocated_gb',
  rss_gb: 'perf/cpu_memory_used_gb',
  pipelines: 'perf/cached_pipelines',
  bind_groups: 'perf/cached_bind_groups',
} as const;

type Row = Record<string, string | number>;

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
  const n = points.length;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  const sxx = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / sxx;
}

export async function benchmarkSoak(argv: string[]): Promise<Row[]> {
  const steps = integerFlag(argv, 'steps', 2000);
  const warmup = integerFlag(argv, 'warmup', Math.min(200, Math.floor(steps / 4)));
  const every = integerFlag(argv, 'every', Math.min(100, steps));
  const dir = mkdtempSync(join(tmpdir(), 'soak-'));
  try {
    const args = [
      TRAIN_JS,
      `trainer.default_local_dir=${dir}`,
      'algorithm.adv_estimator=grpo',
      'actor_rollout_ref.rollout.n=4',
      'data.train_batch_size=32',
      'actor_rollout_ref.actor.ppo_mini_batch_size=16',
      'trainer.total_epochs=100000',
      `trainer.total_training_steps=${steps}`,
      `trainer.test_freq=${every}`,
      `trainer.save_freq=${Math.min(500, steps)}`,
      'trainer.max_actor_ckpt_to_keep=1',
      'data.val_max_samples=64',
      'trainer.logger=[file]',
    ];
    const started = performance.now();
    const code = await new Promise<number | null>((done) =>
      spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] }).on('exit', done),
    );
    if (code !== 0) throw new Error(`soak: node train.js exited with ${code}`);
    const seconds = (performance.now() - started) / 1000;
    const records = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { step: number; data: Record<string, number> })
      .filter((r) => 'perf/memory_allocated_gb' in r.data);
    const rows: Row[] = records
      .filter((r) => r.step === 1 || r.step % every === 0)
      .map((r) => ({
        step: r.step,
        ...Object.fromEntries(Object.entries(SAMPLED).map(([name, key]) => [name, r.data[key]])),
      }));
    const settled = records.filter((r) => r.step > warmup);
    const slopes: Row = { step: `slope/1000 steps after ${warmup}` };
    for (const [name, key] of Object.entries(SAMPLED))
      slopes[name] = slope(settled.map((r) => [r.step, r.data[key]])) * 1000;
    rows.push(slopes, { step: `${steps} steps in ${seconds.toFixed(0)} s (warm start included)` });
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
