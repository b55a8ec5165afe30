// The outer PPO run loop, shared by the command line and the demo: steps until the run's total, a validation
// every trainer.test_freq steps and a checkpoint every trainer.save_freq steps, the last step included — as verl's
// RayPPOTrainer.fit: `freq > 0 and (is_last_step or global_steps % freq == 0)`, so ≤ 0 never validates or saves,
// not even at the end. At the end the final checkpoint comes before the final validation (verl validates first),
// so a validation that fails finds the trained weights already saved. Whatever stops the run early saves the last
// completed step first, whatever save_freq says: a stop signal (after the step or validation under way), or an error
// in a step or a validation — unless the failed step had begun updating the weights, which would then be neither
// the last step's nor the next one's. What differs between callers comes in
// as hooks: what a step reports, how a save is written (Node only), pausing and stop signals, the non-finite guard
// (inside the step hook).
import type { PpoConfig } from '../config.ts';
import { NonFiniteError } from '../training/finite-guard.ts';

export type RunEnd = 'finished' | 'stopped' | 'interrupted';

/** Why a validation runs: trainer.test_freq, or the end of the run. */
export type ValidationPoint = 'test_freq' | 'final';

/**
 * Why a checkpoint is saved: trainer.save_freq, the end of the run, a stop signal, or an error after completed steps.
 */
export type SavePoint = 'save_freq' | 'final' | 'interrupt' | 'error';

/** What the run is doing, which decides what a stop signal does (stop-signals-node.ts). */
export type RunPhase =
  | 'setup'
  | 'step'
  | 'validation'
  | 'writing-checkpoint'
  | 'renaming-checkpoint'
  | 'final-validation';

/** A stop asked for from outside (a signal); the loop keeps `phase` current. (stop-signals-node.ts's watch, which this
 *  browser-safe file cannot import.) */
export interface StopRequest {
  readonly requested: boolean;
  phase: RunPhase;
}

/** What a run stopped by an error saved of its completed steps. */
export type StopSave = 'saved' | 'already saved' | 'not saved' | 'no step completed';

/**
 * The error a run stops with, saying what was saved of its completed steps and how to resume (`resume` words a
 * checkpoint directory with the command that resumes from it). The non-finite guard's error already names the last
 * good checkpoint (the weights of a diverging step are never saved), and a fresh run stopped in its first step has
 * nothing to save or resume: those stay as they are.
 */
export function stopError(
  err: unknown,
  saved: StopSave,
  step: number,
  lastCheckpoint: string | null,
  resume: (dir: string) => string,
): Error {
  if (err instanceof NonFiniteError || (saved === 'no step completed' && lastCheckpoint === null)) return err as Error;
  const message = err instanceof Error ? err.message : String(err);
  const outcome =
    saved === 'saved'
      ? `saved step ${step}, the last completed, to ${resume(lastCheckpoint!)}`
      : saved === 'already saved'
        ? `the last completed step ${step} is saved in ${resume(lastCheckpoint!)}`
        : saved === 'no step completed'
          ? `no step completed since ${resume(lastCheckpoint!)}`
          : lastCheckpoint
            ? `nothing was saved after this error; the newest checkpoint is ${resume(lastCheckpoint)}`
            : 'nothing was saved: the run had no checkpoint yet';
  return new Error(`${message}; ${outcome}`, { cause: err });
}

export interface RunLoopHooks {
  /** Runs the next PPO step and reports it (console line, metrics sinks, charts). */
  step(): Promise<void>;
  validate(at: ValidationPoint): Promise<void>;
  /** Writes a checkpoint of the last completed step; absent: the run saves nothing (the demo). */
  save?(at: SavePoint): Promise<void>;
  /** Before each step (where a pause waits); false stops the run there, without a save or a final validation. */
  beforeStep?(): Promise<boolean>;
  /** Stop signals: one requested during a step or a validation saves (`'interrupt'`) and ends the run after it. */
  stop?: StopRequest;
  /**
   * A step or a validation threw: whether the last completed step may still be saved (false when the failed step
   * had begun updating the weights, or for errors whose message already names the checkpoint to go back to).
   */
  canSaveAfter?(err: unknown): boolean;
  /** The error the run stops with, told whether the last completed step was saved after `err` ('no step
   *  completed': the run stopped in its first step, so it has nothing newer than its starting checkpoint, if any). */
  describeStop?(err: unknown, saved: StopSave): Error;
}

/**
 * Runs from `trainer.globalStep` (a resumed run's step) to `totalSteps`; the caller returns early when there is nothing
 * left.
 */
export async function runTrainingLoop(
  trainer: { readonly globalStep: number },
  totalSteps: number,
  freq: Pick<PpoConfig['trainer'], 'test_freq' | 'save_freq'>,
  hooks: RunLoopHooks,
): Promise<RunEnd> {
  const every = (n: number, step: number) => n > 0 && step % n === 0;
  const startStep = trainer.globalStep;
  let savedStep = -1;
  const phase = (next: RunPhase) => {
    if (hooks.stop) hooks.stop.phase = next;
  };
  const save = async (at: SavePoint) => {
    phase('writing-checkpoint');
    await hooks.save!(at);
    savedStep = trainer.globalStep;
    // Until the next step starts, a signal stops the run at the top of the loop, with this save as its checkpoint.
    phase('step');
  };
  /** Saves the last completed step unless it is saved, or was the run's starting point (a resumed checkpoint). */
  const saveForStop = async (at: 'interrupt' | 'error'): Promise<boolean> => {
    if (!hooks.save || savedStep === trainer.globalStep || trainer.globalStep === startStep) return false;
    await save(at);
    return true;
  };
  const stopOnError = async (err: unknown): Promise<never> => {
    if (!hooks.describeStop) throw err;
    if (trainer.globalStep === startStep) throw hooks.describeStop(err, 'no step completed');
    if (!(hooks.canSaveAfter?.(err) ?? false)) throw hooks.describeStop(err, 'not saved');
    let saved: boolean;
    try {
      saved = await saveForStop('error');
    } catch {
      // Saving failed as well: the error that stopped the run is the one to report.
      throw hooks.describeStop(err, 'not saved');
    }
    throw hooks.describeStop(err, saved ? 'saved' : 'already saved');
  };
  const stopRequested = () => hooks.stop?.requested ?? false;
  // A stop signal aborts calls that wait on other processes (rollout servers): a step or validation that fails that
  // way with the weights untouched is the interruption, and the last completed step is saved as for any stop.
  const stopOrFail = async (err: unknown): Promise<void> => {
    if (!(stopRequested() && (hooks.canSaveAfter?.(err) ?? false))) await stopOnError(err);
  };

  while (trainer.globalStep < totalSteps) {
    if (stopRequested()) {
      await saveForStop('interrupt');
      return 'interrupted';
    }
    if (hooks.beforeStep && !(await hooks.beforeStep())) return 'stopped';
    phase('step');
    await hooks.step().catch(stopOrFail);
    const step = trainer.globalStep;
    if (stopRequested()) continue;
    // The last step's validation is the final one, after the final save.
    if (every(freq.test_freq, step) && step < totalSteps) {
      phase('validation');
      await hooks.validate('test_freq').catch(stopOrFail);
    }
    if (hooks.save && every(freq.save_freq, step)) await save('save_freq');
  }
  if (hooks.save && freq.save_freq > 0 && savedStep !== trainer.globalStep) await save('final');
  if (stopRequested()) {
    await saveForStop('interrupt');
    return 'interrupted';
  }
  if (freq.test_freq > 0) {
    phase('final-validation');
    await hooks.validate('final');
  }
  return 'finished';
}
