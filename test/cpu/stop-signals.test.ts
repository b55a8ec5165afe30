// What each stop signal does at each point of a run, driven in-process: the signal is emitted to this process's
// listeners and process.exit is caught, so the test sees what a user reads and the status the run would exit with.
import { describe, it, expect, vi, afterEach } from 'vitest';
import {
  watchStopSignals,
  stopOnSignalDuringSetup,
  signalExitCode,
  STOP_SIGNALS,
} from '../../ppo/jobs/stop-signals-node.ts';

class Exited extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

function catchExit() {
  return vi.spyOn(process, 'exit').mockImplementation(((code: number) => {
    throw new Exited(code);
  }) as never);
}

/** Emits `signal` to the watch's listener; the exit status if it exited, else null. */
function send(signal: (typeof STOP_SIGNALS)[number]): number | null {
  try {
    process.emit(signal, signal);
    return null;
  } catch (err) {
    if (err instanceof Exited) return err.code;
    throw err;
  }
}

afterEach(() => vi.restoreAllMocks());

describe('stop signals', () => {
  it('exit with 128 + the signal number, as shells report it', () => {
    expect(STOP_SIGNALS.map(signalExitCode)).toEqual([130, 143, 129]);
  });

  it.each(STOP_SIGNALS)(
    '%s during a step: the first finishes the step and asks to stop, the second abandons it',
    (signal) => {
      catchExit();
      const lines: string[] = [];
      const watch = watchStopSignals(
        () => ({ step: 4, lastCheckpoint: '/runs/x/global_step_4' }),
        (line) => lines.push(line),
      );
      try {
        watch.phase = 'step';
        expect(send(signal)).toBeNull();
        expect(watch.requested).toBe(true);
        expect(watch.signal).toBe(signal);
        expect(send(signal)).toBe(signalExitCode(signal));
        expect(lines).toEqual([
          `${signal}: finishing step 5, then saving a checkpoint and stopping (a second signal abandons the step)`,
          `${signal}: abandoned step 5; the same command resumes from /runs/x/global_step_4`,
        ]);
      } finally {
        watch.dispose();
      }
    },
  );

  it(
    'a second signal while a checkpoint is written abandons it and says the previous one is as it was; while it is ' +
      'renamed, waits',
    () => {
      catchExit();
      const lines: string[] = [];
      const watch = watchStopSignals(
        () => ({ step: 6, lastCheckpoint: '/runs/x/global_step_4' }),
        (line) => lines.push(line),
      );
      try {
        watch.phase = 'renaming-checkpoint';
        expect(send('SIGTERM')).toBeNull();
        expect(send('SIGTERM')).toBeNull();
        watch.phase = 'writing-checkpoint';
        expect(send('SIGTERM')).toBe(143);
        expect(lines).toEqual([
          'SIGTERM: the checkpoint of step 6 is being renamed into place; stopping as soon as it is',
          'SIGTERM: the checkpoint of step 6 is being renamed into place; stopping as soon as it is',
          'SIGTERM: abandoned the checkpoint of step 6 before it was complete (its staging folder goes at the next ' +
            'start); ' +
            'the previous checkpoint /runs/x/global_step_4 is as it was, and the same command resumes from ' +
            '/runs/x/global_step_4',
        ]);
      } finally {
        watch.dispose();
      }
    },
  );

  it(
    'the first signal during a save or a validation lets it finish; during the final validation it stops at ' + 'once',
    () => {
      catchExit();
      const lines: string[] = [];
      for (const phase of ['writing-checkpoint', 'validation'] as const) {
        const watch = watchStopSignals(
          () => ({ step: 2, lastCheckpoint: null }),
          (line) => lines.push(line),
        );
        watch.phase = phase;
        expect(send('SIGHUP')).toBeNull();
        watch.dispose();
      }
      const watch = watchStopSignals(
        () => ({ step: 3, lastCheckpoint: '/runs/x/global_step_3' }),
        (line) => lines.push(line),
      );
      watch.phase = 'final-validation';
      expect(send('SIGINT')).toBe(130);
      watch.dispose();
      expect(lines).toEqual([
        'SIGHUP: finishing the checkpoint of step 2, then stopping (a second signal abandons it)',
        'SIGHUP: finishing the validation at step 2, then saving a checkpoint and stopping (a second signal stops at ' +
          'once)',
        'SIGINT: stopped the final validation; the trained model is saved in /runs/x/global_step_3, and the same ' +
          'command runs the final validation again',
      ]);
    },
  );

  it('dispose removes every listener it added', () => {
    const before = STOP_SIGNALS.map((s) => process.listenerCount(s));
    const watch = watchStopSignals(() => ({ step: 0, lastCheckpoint: null }));
    const stopSetup = stopOnSignalDuringSetup('setup');
    expect(STOP_SIGNALS.map((s) => process.listenerCount(s))).toEqual(before.map((n) => n + 2));
    watch.dispose();
    stopSetup();
    expect(STOP_SIGNALS.map((s) => process.listenerCount(s))).toEqual(before);
  });

  it('during setup, nothing is written yet: any stop signal ends the process at once', () => {
    catchExit();
    const lines: string[] = [];
    const stopSetup = stopOnSignalDuringSetup('setup and the warm start', (line) => lines.push(line));
    try {
      expect(send('SIGTERM')).toBe(143);
      expect(lines).toEqual([
        'SIGTERM: stopped during setup and the warm start; nothing of this run was written, so the same command ' +
          'starts over',
      ]);
    } finally {
      stopSetup();
    }
  });
});
