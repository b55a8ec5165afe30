// The run directory (trainer.default_local_dir) across runs: nothing of a previous run is deleted or truncated
// before this run's inputs have loaded, a fresh start moves the previous run's history aside instead of
// emptying it, a resumed run drops the metrics lines written after the step it resumes from, and staging
// folders of saves that died with their process are removed. Shared by the PPO run (ppo/jobs/ppo-run-node.ts) and
// the supervised jobs (ppo/jobs/supervised-run-node.ts).
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { STAGING_DIRECTORY, STEP_DIR_PREFIX } from './step-directory-node.ts';
import { METRICS_FILE } from '../loggers/tracking-node.ts';
import { withFileContext } from '../config/user-error.ts';
import { replaceFile } from '../../models/fs-node.ts';
import { acquireRunLock, processAlive } from './run-lock-node.ts';

/** Where a fresh start moves a previous run's metrics and checkpoints: `<run dir>/previous_run_<time>/`. */
const PREVIOUS_RUN_PREFIX = 'previous_run_';
/** The resolved configuration a run writes beside its metrics (ppo/jobs/ppo-run-node.ts). */
const CONFIG_FILE = 'config.yaml';

/** Creates the run directory and proves it writable before any work, so a read-only one fails in a second. */
export async function prepareRunDirectory(runDir: string): Promise<void> {
  await withFileContext(`trainer.default_local_dir=${runDir} is not a writable directory`, async () => {
    await mkdir(runDir, { recursive: true });
    const probe = join(runDir, `.write-test-${process.pid}`);
    await writeFile(probe, '');
    await rm(probe);
  });
}

/**
 * Makes the run directory this run's, once every input has loaded: creates it and proves it writable, takes its lock
 * (`warn` says when a dead run's lock is taken over) and removes the staging folders of saves that died. Returns the
 * function that releases the lock.
 */
export async function claimRunDirectory(runDir: string, warn: (line: string) => void): Promise<() => void> {
  await prepareRunDirectory(runDir);
  const release = await acquireRunLock(runDir, warn);
  try {
    for (const name of await removeStaleSaves(runDir))
      warn(`removed ${name}: the staging folder of a save that did not finish`);
  } catch (err) {
    release();
    throw err;
  }
  return release;
}

/**
 * The run's history in a claimed run directory: a resumed run (from the checkpoint of `resumedStep`) continues the
 * metrics up to that step; a fresh one (null) moves a previous run's metrics and checkpoints aside and says where.
 */
export async function startRunHistory(
  runDir: string,
  resumedStep: number | null,
  warn: (line: string) => void,
): Promise<void> {
  if (resumedStep !== null) {
    await trimMetricsAfter(join(runDir, METRICS_FILE), resumedStep);
    return;
  }
  const archive = await setAsidePreviousRun(runDir);
  if (archive) warn(`fresh start: the previous run's metrics and checkpoints moved to ${archive}`);
}

/**
 * Removes `.global_step_N.saving-PID` staging folders whose process is gone (a save killed or failed); returns them.
 */
export async function removeStaleSaves(runDir: string): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(runDir)) {
    const match = STAGING_DIRECTORY.exec(name);
    if (!match || processAlive(Number(match[1]))) continue;
    await rm(join(runDir, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/**
 * A fresh start (nothing resumed, e.g. trainer.resume_mode=disable) in a directory holding a previous run: its
 * metrics.jsonl, config.yaml and global_step_* move into previous_run_<time>/, so this run's history starts empty and a
 * later auto-resume cannot continue an old checkpoint into the new metrics. Returns that folder, or null.
 */
export async function setAsidePreviousRun(runDir: string, now = new Date()): Promise<string | null> {
  const names = (await readdir(runDir)).filter(
    (name) => name === METRICS_FILE || name === CONFIG_FILE || name.startsWith(STEP_DIR_PREFIX),
  );
  if (names.length === 0) return null;
  const archive = join(runDir, `${PREVIOUS_RUN_PREFIX}${now.toISOString().replace(/[:.]/g, '-')}`);
  await withFileContext(`moving the previous run in ${runDir} to ${archive}`, async () => {
    await mkdir(archive);
    for (const name of names) await rename(join(runDir, name), join(archive, name));
  });
  return archive;
}

/**
 * Where an unreadable checkpoint goes when auto-resume falls back past it: `unreadable_global_step_N_<time>` beside it.
 */
export async function setAsideUnreadableCheckpoint(checkpointDir: string, now = new Date()): Promise<string> {
  const aside = join(
    dirname(checkpointDir),
    `unreadable_${basename(checkpointDir)}_${now.toISOString().replace(/[:.]/g, '-')}`,
  );
  await withFileContext(`moving the unreadable checkpoint ${checkpointDir} aside`, () => rename(checkpointDir, aside));
  return aside;
}

/** A checkpoint auto-resume fell back past, and why it cannot be resumed. */
export interface UnreadableCheckpoint {
  dir: string;
  problem: string;
}

/**
 * Moves each checkpoint auto-resume fell back past aside, once the run directory may be written, and says so with
 * the checkpoint the run resumes instead (train.js, sft.js and reward-model.js alike).
 */
export async function setAsideUnreadableCheckpoints(
  unreadable: readonly UnreadableCheckpoint[],
  resumeDir: string | null,
  warn: (line: string) => void,
): Promise<void> {
  for (const { dir, problem } of unreadable) {
    const aside = await setAsideUnreadableCheckpoint(dir);
    warn(
      `resume: ${dir} cannot be resumed (${problem}); moved it to ${aside} and ` +
        (resumeDir
          ? `resuming from ${resumeDir}, the newest intact checkpoint`
          : 'starting fresh: no intact checkpoint is left'),
    );
  }
}

/**
 * A resumed run continues the metrics of the run it resumes: lines of steps after `step` (written after the
 * last checkpoint, before a kill) and a torn last line are dropped, so no step appears twice. Atomic (rename).
 */
export async function trimMetricsAfter(metricsFile: string, step: number): Promise<number> {
  let text: string;
  try {
    text = await readFile(metricsFile, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  const kept = lines.filter((line) => {
    try {
      // verl's file logger writes {"step": N, "data": {...}} per line.
      const at = (JSON.parse(line) as { step?: unknown }).step;
      return typeof at !== 'number' || at <= step;
    } catch {
      return false;
    }
  });
  if (kept.length === lines.length) return 0;
  await withFileContext(`trimming ${metricsFile} to step ${step}`, () =>
    replaceFile(metricsFile, kept.map((line) => `${line}\n`).join('')),
  );
  return lines.length - kept.length;
}
