// The SFT and reward-model jobs keep their run directory as `node train.js` keeps its own: one job at a time (a second
// one stops with one line naming the directory and the holder), a stop signal saves the last completed step and the
// resumed job's metrics are the uninterrupted job's, a resumed job drops the metrics lines past its checkpoint, and a
// fresh job moves a previous run aside. Tiny SFT runs; the stop signal is emitted in-process during a step (as
// test/cpu/stop-signals.test.ts does) and, for the command line, sent to `node sft.js` itself.
import { describe, it, expect, vi, afterEach } from 'vitest';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { cp, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gpuEngine } from '../support/gpu-engine.ts';
import { makeTinySftRun, runMetrics } from '../support/tiny-run.ts';
import { parseSftOverrides } from '../../ppo/sft/sft-config.ts';
import { runSftJob } from '../../ppo/jobs/sft-job-node.ts';
import { SftTrainer } from '../../ppo/sft/sft-trainer.ts';

const script = (name: string) => fileURLToPath(new URL(`../../${name}`, import.meta.url));
const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

interface Outcome {
  code: number | null;
  /** stderr's lines (the entry point drops Dawn's known-harmless adapter lines). */
  errors: string[];
}

function start(file: string, args: string[]): { child: ChildProcess; outcome: Promise<Outcome> } {
  const child = spawn(process.execPath, [script(file), ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    timeout: 240_000,
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const outcome = new Promise<Outcome>((done) =>
    child.on('exit', (code) => done({ code, errors: stderr.split('\n').filter((l) => l.trim() !== '') })),
  );
  return { child, outcome };
}

/** A metrics line per step and per validation: the step, and the losses (timings differ between runs). */
const losses = async (dir: string) =>
  (await runMetrics(dir)).map((m) => [m.step, m.data['train/loss'] ?? null, m.data['val/loss'] ?? null]);

afterEach(() => vi.restoreAllMocks());

describe('the SFT and reward-model jobs keep their run directory as train.js does', () => {
  it(
    'node sft.js holds its directory: a second job (SFT or reward model) is refused in one line; SIGTERM saves the ' +
      'step, exits 143 and frees it',
    async () => {
      const { root, launch } = await makeTinySftRun();
      const dir = join(root, 'cli');
      // Without the cluster key, whose note would be a second stderr line; no save or validation for SIGTERM to meet.
      const args = (steps: number) =>
        launch('cli', steps, ['trainer.save_freq=1000', 'trainer.test_freq=1000']).filter(
          (a) => !a.startsWith('trainer.n_gpus_per_node'),
        );
      const first = start('sft.js', args(100_000));
      for (;;) {
        const lines = (await readFile(join(dir, 'metrics.jsonl'), 'utf8').catch(() => ''))
          .trim()
          .split('\n')
          .filter((l) => l !== '');
        if (lines.some((l) => 'train/loss' in JSON.parse(l).data)) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const lock = JSON.parse(await readFile(join(dir, 'run.lock'), 'utf8'));
      expect(Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(lock.pid)], { encoding: 'utf8' }).trim())).toBe(
        first.child.pid,
      );
      const refusal = new RegExp(
        `^error: trainer\\.default_local_dir=${dir.replace(/[.]/g, '\\.')} is in use by another run \\(pid ${lock.pid} on ${hostname()}, since .*\\) — wait for it`,
      );
      // The lock is checked before any input is read, so the reward-model job's data need not be pairs here.
      const [second, rewardModel] = await Promise.all([
        start('sft.js', args(2)).outcome,
        start('reward-model.js', [
          `data.train_files=${join(root, 'sft-train.jsonl')}`,
          `model.partial_pretrain=${join(root, 'model')}`,
          `trainer.default_local_dir=${dir}`,
        ]).outcome,
      ]);
      for (const refused of [second, rewardModel]) {
        expect(refused.errors, refused.errors.join('\n')).toHaveLength(1);
        expect(refused.errors[0]).toMatch(refusal);
        expect(refused.code).toBe(1);
      }

      first.child.kill('SIGTERM');
      const outcome = await first.outcome;
      expect(outcome.code).toBe(143);
      expect(outcome.errors[0]).toMatch(/^SIGTERM: finishing step \d+, then saving a checkpoint and stopping/);
      const saved =
        /^interrupted by SIGTERM after step (\d+): checkpoint (\S+); the same command resumes from it$/.exec(
          outcome.errors.at(-1)!,
        );
      expect(saved, outcome.errors.join('\n')).not.toBeNull();
      expect(saved![2]).toBe(join(dir, `global_step_${saved![1]}`));
      expect(JSON.parse(await readFile(join(saved![2], 'job_state.json'), 'utf8')).global_step).toBe(Number(saved![1]));
      expect((await runMetrics(dir)).at(-1)!.step).toBe(Number(saved![1]));
      expect(await exists(join(dir, 'run.lock'))).toBe(false);
    },
  );

  it(
    'a stop signal during a step saves that step; resumed, and resumed again after a kill, the metrics are the ' +
      "uninterrupted job's",
    async () => {
      const engine = await gpuEngine();
      const { root, launch } = await makeTinySftRun();
      // save_freq=3: the stop's checkpoint (step 2) is its own; test_freq=3: no validation is due at the stopped step.
      const run = (dir: string, warn: (line: string) => void = () => {}) =>
        runSftJob(
          engine,
          parseSftOverrides(launch(dir, 4, ['trainer.save_freq=3', 'trainer.test_freq=3'])).config,
          () => {},
          warn,
        );
      const _straight = await run('straight');

      const trainStep = SftTrainer.prototype.trainStep;
      let calls = 0;
      vi.spyOn(SftTrainer.prototype, 'trainStep').mockImplementation(function (this: SftTrainer, ...args) {
        if (++calls === 2) process.emit('SIGTERM', 'SIGTERM');
        return trainStep.apply(this, args);
      });
      const said: string[] = [];
      const stopped = await run('stopped', (line) => said.push(line));
      vi.restoreAllMocks();
      const dir = join(root, 'stopped');
      expect(stopped).toMatchObject({ stoppedBy: 'SIGTERM', steps: 2, checkpoint: join(dir, 'global_step_2') });
      expect(said).toEqual([
        'SIGTERM: finishing step 2, then saving a checkpoint and stopping (a second signal abandons the step)',
        `interrupted by SIGTERM after step 2: checkpoint ${join(dir, 'global_step_2')}; the same command resumes ` +
          `from it`,
      ]);
      expect(await exists(join(dir, 'run.lock'))).toBe(false);
      const resumed = await run('stopped');
      expect(resumed.steps).toBe(4);
      expect(await losses(dir)).toEqual(await losses(join(root, 'straight')));

      // Killed after step 4 was logged but before it was saved: the resumed job drops step 4's lines and trains it
      // again.
      const killed = join(root, 'killed');
      await cp(join(root, 'straight'), killed, { recursive: true });
      await rm(join(killed, 'global_step_4'), { recursive: true });
      expect((await run('killed')).steps).toBe(4);
      expect(await losses(killed)).toEqual(await losses(join(root, 'straight')));
    },
  );

  it(
    "a step that throws saves the last completed step, as train.js does; the resumed job's metrics are the " +
      "uninterrupted job's",
    async () => {
      const engine = await gpuEngine();
      const { root, launch } = await makeTinySftRun();
      // No save and no validation is due before the failing step 3: the error's save is the only one.
      const run = (dir: string) =>
        runSftJob(
          engine,
          parseSftOverrides(launch(dir, 4, ['trainer.save_freq=4', 'trainer.test_freq=4'])).config,
          () => {},
          () => {},
        );
      await run('straight');
      const trainStep = SftTrainer.prototype.trainStep;
      let calls = 0;
      vi.spyOn(SftTrainer.prototype, 'trainStep').mockImplementation(function (this: SftTrainer, ...args) {
        if (++calls === 3) return Promise.reject(new Error('the device was lost'));
        return trainStep.apply(this, args);
      });
      const dir = join(root, 'failed');
      await expect(run('failed')).rejects.toThrow(
        `the device was lost; saved step 2, the last completed, to ${join(dir, 'global_step_2')}: the same command ` +
          `resumes from it`,
      );
      vi.restoreAllMocks();
      expect(await exists(join(dir, 'run.lock'))).toBe(false);
      expect((await run('failed')).steps).toBe(4);
      expect(await losses(dir)).toEqual(await losses(join(root, 'straight')));
    },
  );

  it('a non-finite loss stops its step before the optimizer applies it and saves nothing from it', async () => {
    const engine = await gpuEngine();
    const { root, launch } = await makeTinySftRun();
    const run = (dir: string) =>
      runSftJob(
        engine,
        parseSftOverrides(launch(dir, 4, ['trainer.save_freq=2', 'trainer.test_freq=4'])).config,
        () => {},
        () => {},
      );
    await run('straight');
    // The third step's micro-batch losses come back NaN (their gradients are applied by nothing: the guard stops
    // first).
    const trainStep = SftTrainer.prototype.trainStep;
    let steps = 0;
    vi.spyOn(SftTrainer.prototype, 'trainStep').mockImplementation(function (this: SftTrainer, ...args) {
      steps++;
      return trainStep.apply(this, args);
    });
    const micro = (
      SftTrainer.prototype as unknown as {
        micro: (...args: unknown[]) => Promise<{ loss: number; realTokens: number }>;
      }
    ).micro;
    vi.spyOn(SftTrainer.prototype as unknown as { micro: typeof micro }, 'micro').mockImplementation(async function (
      this: SftTrainer,
      ...args: unknown[]
    ) {
      const part = await micro.apply(this, args);
      return args[1] === true && steps === 3 ? { ...part, loss: NaN } : part;
    });
    const dir = join(root, 'diverged');
    const error = await run('diverged').then(
      () => null,
      (err: Error) => err.message,
    );
    expect(error).toMatch(
      /^step 3: train\/loss is NaN; the step was stopped before the optimizer applied it \(.*\); the last good checkpoint is (\S+)$/,
    );
    expect(error!.endsWith(`the last good checkpoint is ${join(dir, 'global_step_2')}`)).toBe(true);
    vi.restoreAllMocks();
    expect((await readdir(dir)).filter((n) => n.startsWith('global_step_'))).toEqual(['global_step_2']);
    expect((await run('diverged')).steps).toBe(4);
    expect(await losses(dir)).toEqual(await losses(join(root, 'straight')));
  });

  it(
    'a fresh job in a used directory moves the previous run under previous_run_*; its metrics start ' + 'empty',
    async () => {
      const engine = await gpuEngine();
      const { root, launch } = await makeTinySftRun();
      const dir = join(root, 'used');
      // A previous run that saved no whole checkpoint (its global_step_2 lacks job_state.json): nothing to resume.
      await mkdir(join(dir, 'global_step_2'), { recursive: true });
      await writeFile(join(dir, 'global_step_2', 'model.safetensors'), 'partial');
      const previousMetrics = '{"step":1,"data":{"train/loss":9}}\n{"step":2,"data":{"train/loss":8}}\n';
      await writeFile(join(dir, 'metrics.jsonl'), previousMetrics);
      const said: string[] = [];
      await runSftJob(
        engine,
        parseSftOverrides(launch('used', 1)).config,
        () => {},
        (line) => said.push(line),
      );
      const archive = (await readdir(dir)).find((n) => n.startsWith('previous_run_'));
      expect(said).toEqual([`fresh start: the previous run's metrics and checkpoints moved to ${join(dir, archive!)}`]);
      expect(await readFile(join(dir, archive!, 'metrics.jsonl'), 'utf8')).toBe(previousMetrics);
      expect(await readFile(join(dir, archive!, 'global_step_2', 'model.safetensors'), 'utf8')).toBe('partial');
      expect((await runMetrics(dir)).map((m) => m.step)).toEqual([0, 1, 1]);
      expect((await readdir(dir)).filter((n) => n.startsWith('global_step_'))).toEqual(['global_step_1']);
    },
  );
});
