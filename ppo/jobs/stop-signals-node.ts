// The signals that stop a run: Ctrl-C (SIGINT), and SIGTERM and SIGHUP, which Slurm, Kubernetes, `timeout` and a
// closed terminal send. Each behaves as Ctrl-C: the first finishes what the run is doing (a step, a validation, a
// checkpoint), saves the last completed step and stops (the same command resumes from it, trainer.resume_mode=auto);
// a second abandons the step at once. Abandoning is safe: a checkpoint is assembled under a staging name and renamed
// into place, the next start removes a dead save's staging folder, and a resumed run drops metrics lines past its
// checkpoint. A second signal while a checkpoint is renamed into place lets the rename finish first. The exit
// status is 128 + the signal's number, as shells report a process a signal ended.
import { constants } from 'node:os';
import type { RunPhase, StopRequest } from './ppo-run-loop.ts';
import { STOP_SIGNALS } from '../../engine/native-stderr-node.ts';

export { STOP_SIGNALS };
export type StopSignal = (typeof STOP_SIGNALS)[number];

/** 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP. */
export function signalExitCode(signal: StopSignal): number {
  return 128 + constants.signals[signal];
}

const say = (line: string) => process.stderr.write(`${line}\n`);

/** What a run stopped by a signal says last, once it saved the last completed step. */
export function interruptedLine(signal: StopSignal, step: number, checkpoint: string | null): string {
  return `interrupted by ${signal} after step ${step}: checkpoint ${checkpoint}; the same command resumes from it`;
}

function onStopSignals(handler: (signal: StopSignal) => void): () => void {
  for (const signal of STOP_SIGNALS) process.on(signal, handler);
  return () => {
    for (const signal of STOP_SIGNALS) process.off(signal, handler);
  };
}

/** A run's watch of the stop signals; the run loop keeps `phase` current, which decides what a signal does. */
export interface StopWatch extends StopRequest {
  readonly signal: StopSignal | null;
  /** Aborted at the first signal: calls that wait on another process (a rollout server) end at once. */
  readonly aborted: AbortSignal;
  dispose(): void;
}

/** Where the run stands when a signal arrives: the step it is on and its newest checkpoint. */
export interface RunPosition {
  step: number;
  lastCheckpoint: string | null;
}

function resumeHint(lastCheckpoint: string | null): string {
  return lastCheckpoint
    ? `the same command resumes from ${lastCheckpoint}`
    : 'no checkpoint was saved yet, so the same command starts over';
}

/** Watches the stop signals from the run directory's first write to the end of the run. */
export function watchStopSignals(position: () => RunPosition, write: (line: string) => void = say): StopWatch {
  let signal: StopSignal | null = null;
  let phase: RunPhase = 'setup';
  const abort = new AbortController();
  const onSignal = (received: StopSignal) => {
    const { step, lastCheckpoint } = position();
    const first = signal === null;
    signal ??= received;
    abort.abort();
    const exit = (line: string) => {
      write(`${received}: ${line}`);
      process.exit(signalExitCode(received));
    };
    switch (phase) {
      case 'setup':
        return exit(`stopped before the first step; ${resumeHint(lastCheckpoint)}`);
      case 'final-validation':
        return exit(
          `stopped the final validation; the trained model is saved in ${lastCheckpoint}, and the same command runs ` +
            `the final validation again`,
        );
      case 'renaming-checkpoint':
        return write(
          `${received}: the checkpoint of step ${step} is being renamed into place; stopping as soon as it is`,
        );
      case 'writing-checkpoint':
        if (first)
          return write(
            `${received}: finishing the checkpoint of step ${step}, then stopping (a second signal abandons it)`,
          );
        return exit(
          `abandoned the checkpoint of step ${step} before it was complete (its staging folder goes at the next ` +
            `start); ` +
            (lastCheckpoint
              ? `the previous checkpoint ${lastCheckpoint} is as it was, and ${resumeHint(lastCheckpoint)}`
              : resumeHint(null)),
        );
      case 'validation':
        if (first)
          return write(
            `${received}: finishing the validation at step ${step}, then saving a checkpoint and stopping (a second ` +
              `signal stops at once)`,
          );
        return exit(`stopped during the validation at step ${step}; ${resumeHint(lastCheckpoint)}`);
      case 'step':
        if (first)
          return write(
            `${received}: finishing step ${step + 1}, then saving a checkpoint and stopping (a second signal ` +
              `abandons the step)`,
          );
        return exit(`abandoned step ${step + 1}; ${resumeHint(lastCheckpoint)}`);
    }
  };
  const dispose = onStopSignals(onSignal);
  return {
    get signal() {
      return signal;
    },
    get requested() {
      return signal !== null;
    },
    aborted: abort.signal,
    get phase() {
      return phase;
    },
    set phase(next: RunPhase) {
      phase = next;
    },
    dispose,
  };
}

/**
 * A signal before the run directory is written (loading the models and data, the built-in job's warm start):
 * nothing of the run is written yet, so it stops at once and says the same command starts over. Returns the
 * function that stops watching, called once the run directory is about to be written.
 */
export function stopOnSignalDuringSetup(what: string, write: (line: string) => void = say): () => void {
  return onStopSignals((signal) => {
    write(`${signal}: stopped during ${what}; nothing of this run was written, so the same command starts over`);
    process.exit(signalExitCode(signal));
  });
}
