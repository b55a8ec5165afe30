import { describe, it, expect } from 'vitest';
import { runTrainingLoop, type RunLoopHooks, type StopRequest, type RunPhase } from '../../ppo/jobs/ppo-run-loop.ts';

interface FakeRun {
  /** Stop before this step (a demo's stop button). */
  stopBefore?: number;
  /** A stop signal during this step. */
  interruptDuring?: number;
  /** A stop signal during the validation after this step. */
  interruptDuringValidationAt?: number;
  /** A stop signal during the final save. */
  interruptDuringFinalSave?: boolean;
  /** This step throws (before its global step counts). */
  failAtStep?: number;
  /** Whether the failed step left the weights of the last completed one (the trainer's atStepBoundary). */
  failedBeforeUpdates?: boolean;
  /** The save after an error fails too. */
  errorSaveFails?: boolean;
  /** Without a save hook, as in the demo. */
  noSave?: boolean;
}

/**
 * A fake trainer that only counts steps; the run's events in order, as `step 3`, `validate test_freq @4`, `save final
 * @5`.
 */
async function schedule(totalSteps: number, test_freq: number, save_freq: number, from = 0, fake: FakeRun = {}) {
  const trainer = { globalStep: from };
  const events: string[] = [];
  let requested = false;
  const stop: StopRequest = {
    get requested() {
      return requested;
    },
    phase: 'setup' as RunPhase,
  };
  const hooks: RunLoopHooks = {
    step: async () => {
      if (trainer.globalStep + 1 === fake.failAtStep) throw new Error(`step ${fake.failAtStep} failed`);
      trainer.globalStep++;
      events.push(`step ${trainer.globalStep} (${stop.phase})`);
      if (trainer.globalStep === fake.interruptDuring) requested = true;
    },
    validate: async (at) => {
      events.push(`validate ${at} @${trainer.globalStep} (${stop.phase})`);
      if (at === 'test_freq' && trainer.globalStep === fake.interruptDuringValidationAt) requested = true;
    },
    save: fake.noSave
      ? undefined
      : async (at) => {
          events.push(`save ${at} @${trainer.globalStep} (${stop.phase})`);
          if (at === 'final' && fake.interruptDuringFinalSave) requested = true;
          if (at === 'error' && fake.errorSaveFails) throw new Error('disk full');
        },
    beforeStep: async () => trainer.globalStep + 1 !== fake.stopBefore,
    stop,
    canSaveAfter: () => fake.failedBeforeUpdates ?? true,
    describeStop: (err, saved) => new Error(`${(err as Error).message}; ${saved}`),
  };
  try {
    const end = await runTrainingLoop(trainer, totalSteps, { test_freq, save_freq }, hooks);
    return {
      end,
      events: events.map((e) => e.replace(/ \((step|validation|writing-checkpoint|final-validation|setup)\)$/, '')),
      phases: events,
    };
  } catch (err) {
    return {
      end: `error: ${(err as Error).message}`,
      events: events.map((e) => e.replace(/ \(\S+\)$/, '')),
      phases: events,
    };
  }
}

const steps = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `step ${from + i}`);

describe('run loop', () => {
  it(
    'validates every test_freq steps and saves every save_freq steps; at the end the final save, then the final ' +
      'validation',
    async () => {
      expect(await schedule(5, 2, 3)).toMatchObject({
        end: 'finished',
        events: [
          'step 1',
          'step 2',
          'validate test_freq @2',
          'step 3',
          'save save_freq @3',
          'step 4',
          'validate test_freq @4',
          'step 5',
          'save final @5',
          'validate final @5',
        ],
      });
    },
  );

  it('keeps the stop watch told what the run is doing: step, validation, checkpoint, final validation', async () => {
    expect((await schedule(2, 2, 1)).phases).toEqual([
      'step 1 (step)',
      'save save_freq @1 (writing-checkpoint)',
      'step 2 (step)',
      'save save_freq @2 (writing-checkpoint)',
      'validate final @2 (final-validation)',
    ]);
    expect((await schedule(3, 2, 5)).phases).toEqual([
      'step 1 (step)',
      'step 2 (step)',
      'validate test_freq @2 (validation)',
      'step 3 (step)',
      'save final @3 (writing-checkpoint)',
      'validate final @3 (final-validation)',
    ]);
  });

  it(
    'validates the last step once (the final validation) and saves it once (save_freq), save before ' + 'validation',
    async () => {
      expect((await schedule(4, 2, 2)).events).toEqual([
        'step 1',
        'step 2',
        'validate test_freq @2',
        'save save_freq @2',
        'step 3',
        'step 4',
        'save save_freq @4',
        'validate final @4',
      ]);
    },
  );

  it(
    'test_freq and save_freq of 0 or -1 never validate or save, not even at the end (verl: freq > 0 and ' +
      '(is_last_step or ...))',
    async () => {
      for (const [test_freq, save_freq] of [
        [0, 0],
        [-1, -1],
        [0, -1],
      ]) {
        expect((await schedule(3, test_freq, save_freq)).events).toEqual(steps(1, 3));
      }
      expect((await schedule(3, 2, -1)).events).toEqual([
        ...steps(1, 2),
        'validate test_freq @2',
        'step 3',
        'validate final @3',
      ]);
      expect((await schedule(3, -1, 2)).events).toEqual([
        ...steps(1, 2),
        'save save_freq @2',
        'step 3',
        'save final @3',
      ]);
    },
  );

  it('with save_freq ≤ 0 a stop signal or an error still saves the last completed step', async () => {
    expect(await schedule(6, -1, -1, 0, { interruptDuring: 2 })).toMatchObject({
      end: 'interrupted',
      events: [...steps(1, 2), 'save interrupt @2'],
    });
    expect(await schedule(3, -1, -1, 0, { interruptDuring: 3 })).toMatchObject({
      end: 'interrupted',
      events: [...steps(1, 3), 'save interrupt @3'],
    });
    expect(await schedule(6, -1, -1, 0, { failAtStep: 3 })).toMatchObject({
      end: 'error: step 3 failed; saved',
      events: [...steps(1, 2), 'save error @2'],
    });
  });

  it('counts test_freq and save_freq in global steps from a resumed step', async () => {
    expect((await schedule(6, 3, 4, 2)).events).toEqual([
      'step 3',
      'validate test_freq @3',
      'step 4',
      'save save_freq @4',
      'step 5',
      'step 6',
      'save final @6',
      'validate final @6',
    ]);
  });

  it('without a save hook (the demo) the same schedule validates and never saves', async () => {
    expect((await schedule(4, 2, 1, 0, { noSave: true })).events).toEqual([
      ...steps(1, 2),
      'validate test_freq @2',
      ...steps(3, 4),
      'validate final @4',
    ]);
  });

  it('a stop signal finishes the step, saves it instead of validating it, and ends the run', async () => {
    expect(await schedule(6, 2, 0, 0, { interruptDuring: 2 })).toMatchObject({
      end: 'interrupted',
      events: [...steps(1, 2), 'save interrupt @2'],
    });
  });

  it('a stop signal during a step whose save_freq save is due saves once', async () => {
    expect(await schedule(6, 2, 2, 0, { interruptDuring: 2 })).toMatchObject({
      end: 'interrupted',
      events: [...steps(1, 2), 'save interrupt @2'],
    });
  });

  it('a stop signal during a validation lets it finish, then saves and ends the run', async () => {
    expect(await schedule(6, 2, 0, 0, { interruptDuringValidationAt: 2 })).toMatchObject({
      end: 'interrupted',
      events: [...steps(1, 2), 'validate test_freq @2', 'save interrupt @2'],
    });
    expect(await schedule(6, 2, 2, 0, { interruptDuringValidationAt: 2 })).toMatchObject({
      end: 'interrupted',
      events: [...steps(1, 2), 'validate test_freq @2', 'save save_freq @2'],
    });
  });

  it(
    'a stop signal during the final save ends the run after it, leaving the final validation to the same ' + 'command',
    async () => {
      expect(await schedule(3, 0, 5, 0, { interruptDuringFinalSave: true })).toMatchObject({
        end: 'interrupted',
        events: [...steps(1, 3), 'save final @3'],
      });
    },
  );

  it('a stop before a step ends the run without a save or a final validation', async () => {
    expect(await schedule(6, 2, 2, 0, { stopBefore: 3 })).toMatchObject({
      end: 'stopped',
      events: ['step 1', 'step 2', 'validate test_freq @2', 'save save_freq @2'],
    });
  });

  it('an error in a step after completed steps saves the last completed step, then stops with the error', async () => {
    expect(await schedule(6, 0, 0, 0, { failAtStep: 3 })).toEqual(
      expect.objectContaining({
        end: 'error: step 3 failed; saved',
        events: [...steps(1, 2), 'save error @2'],
      }),
    );
  });

  it(
    "an error after a save of the last completed step saves nothing more; one in the run's first step has nothing " +
      'to save',
    async () => {
      expect(await schedule(6, 0, 2, 0, { failAtStep: 3 })).toMatchObject({
        end: 'error: step 3 failed; already saved',
        events: [...steps(1, 2), 'save save_freq @2'],
      });
      expect(await schedule(6, 0, 0, 4, { failAtStep: 5 })).toMatchObject({
        end: 'error: step 5 failed; no step completed',
        events: [],
      });
      expect(await schedule(6, 0, 0, 0, { failAtStep: 1 })).toMatchObject({
        end: 'error: step 1 failed; no step completed',
        events: [],
      });
    },
  );

  it('a step that failed after it began updating the weights is not saved', async () => {
    expect(await schedule(6, 0, 0, 0, { failAtStep: 3, failedBeforeUpdates: false })).toMatchObject({
      end: 'error: step 3 failed; not saved',
      events: steps(1, 2),
    });
  });

  it('when the save after an error fails too, the error that stopped the run is reported, not saved', async () => {
    expect(await schedule(6, 0, 0, 0, { failAtStep: 3, errorSaveFails: true })).toMatchObject({
      end: 'error: step 3 failed; not saved',
      events: [...steps(1, 2), 'save error @2'],
    });
  });

  it('without describeStop (the demo) an error stops the run as it is, with no save', async () => {
    const trainer = { globalStep: 0 };
    const saves: string[] = [];
    await expect(
      runTrainingLoop(
        trainer,
        3,
        { test_freq: 0, save_freq: 0 },
        {
          step: async () => {
            if (trainer.globalStep === 1) throw new Error('boom');
            trainer.globalStep++;
          },
          validate: async () => {},
          save: async (at) => void saves.push(at),
        },
      ),
    ).rejects.toThrow(/^boom$/);
    expect(saves).toEqual([]);
  });
});
