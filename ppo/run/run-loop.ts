// The outer PPO run loop, shared by the command line and the demo: steps until the run's total, a validation
// every trainer.test_freq steps, a checkpoint every trainer.save_freq steps (≤ 0: never, as in verl), and at the
// end the final checkpoint, then the final validation, so a validation that fails finds the trained weights
// already saved. What differs between callers comes in as hooks: what a step reports, how a save is written
// (Node only), pausing and Ctrl-C, the non-finite guard (inside the step hook).
import type { PpoConfig } from '../config.ts';

export type RunEnd = 'finished' | 'stopped' | 'interrupted';

/** Why a validation runs: trainer.test_freq, or the end of the run. */
export type ValidationPoint = 'test_freq' | 'final';

/** Why a checkpoint is saved: trainer.save_freq, the end of the run, or a Ctrl-C after a step. */
export type SavePoint = 'save_freq' | 'final' | 'interrupt';

export interface RunLoopHooks {
  /** Runs the next PPO step and reports it (console line, metrics sinks, charts). */
  step(): Promise<void>;
  validate(at: ValidationPoint): Promise<void>;
  /** Writes a checkpoint of the step just run; absent: the run saves nothing (the demo). */
  save?(at: SavePoint): Promise<void>;
  /** Before each step (where a pause waits); false stops the run there, without a save or a final validation. */
  beforeStep?(): Promise<boolean>;
  /**
   * Starts watching for Ctrl-C while steps run; one requested after a step saves (`'interrupt'`) and ends the run
   * before that step's validation. The watch is disposed before the final save, so a Ctrl-C there acts as usual.
   * (interrupt.ts's watch, which this browser-safe file cannot import.)
   */
  watchInterrupt?(): { readonly requested: boolean; dispose(): void };
}

/** Runs from `trainer.globalStep` (a resumed run's step) to `totalSteps`; the caller returns early when there is nothing left. */
export async function runTrainingLoop(trainer: { readonly globalStep: number }, totalSteps: number,
  freq: Pick<PpoConfig['trainer'], 'test_freq' | 'save_freq'>, hooks: RunLoopHooks): Promise<RunEnd> {
  const every = (n: number, step: number) => n > 0 && step % n === 0;
  let savedStep = -1;
  const interrupt = hooks.watchInterrupt?.();
  try {
    while (trainer.globalStep < totalSteps) {
      if (hooks.beforeStep && !(await hooks.beforeStep())) return 'stopped';
      await hooks.step();
      const step = trainer.globalStep;
      if (interrupt?.requested) {
        await hooks.save?.('interrupt');
        return 'interrupted';
      }
      // The last step's validation is the final one, after the final save.
      if (every(freq.test_freq, step) && step < totalSteps) await hooks.validate('test_freq');
      if (hooks.save && every(freq.save_freq, step)) {
        await hooks.save('save_freq');
        savedStep = step;
      }
    }
  } finally {
    interrupt?.dispose();
  }
  if (hooks.save && savedStep !== trainer.globalStep) await hooks.save('final');
  await hooks.validate('final');
  return 'finished';
}
