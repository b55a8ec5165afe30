// Ctrl-C during a run: the first finishes the current step, saves a checkpoint and stops (the command resumes
// from it as it is, trainer.resume_mode=auto); a second abandons the step at once. Abandoning is safe: a
// checkpoint is assembled under a staging name and renamed into place, the next start removes a dead save's
// staging folder, and a resumed run drops metrics lines past its checkpoint.

/** Exit status of a run stopped by Ctrl-C (128 + SIGINT, as shells report it). */
export const INTERRUPT_EXIT_CODE = 130;

export interface InterruptWatch {
  /** Set by the first Ctrl-C: stop after the current step. */
  readonly requested: boolean;
  dispose(): void;
}

/** Watches SIGINT for the duration of a training loop; `say` reports each Ctrl-C (on stderr). */
export function watchInterrupt(describe: () => { step: number; lastCheckpoint: string | null }, say: (line: string) => void = (line) => process.stderr.write(line + '\n')): InterruptWatch {
  let requested = false;
  const onSigint = () => {
    const { step, lastCheckpoint } = describe();
    if (!requested) {
      requested = true;
      say(`interrupt: finishing step ${step + 1}, then saving a checkpoint and stopping (Ctrl-C again abandons the step)`);
      return;
    }
    say(`interrupt: abandoned step ${step + 1}; ` + (lastCheckpoint
      ? `the same command resumes from ${lastCheckpoint}`
      : 'no checkpoint was saved yet, so the same command starts over'));
    process.exit(INTERRUPT_EXIT_CODE);
  };
  process.on('SIGINT', onSigint);
  return {
    get requested() {
      return requested;
    },
    dispose: () => process.off('SIGINT', onSigint),
  };
}

/**
 * Ctrl-C before the training loop (loading the models and data, the built-in job's warm start): nothing of the run
 * is written yet, so it stops at once and says the same command starts over. Returns the function that stops
 * watching, called once the run directory is about to be written.
 */
export function stopOnInterrupt(phase: string, say: (line: string) => void = (line) => process.stderr.write(line + '\n')): () => void {
  const onSigint = () => {
    say(`interrupt: stopped during ${phase}; nothing of this run was written, so the same command starts over`);
    process.exit(INTERRUPT_EXIT_CODE);
  };
  process.on('SIGINT', onSigint);
  return () => process.off('SIGINT', onSigint);
}
