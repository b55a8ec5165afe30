import { describe, it, expect } from 'vitest';
import { runTrainingLoop, type RunLoopHooks } from '../../ppo/run/run-loop.ts';

interface FakeRun {
  /** Stop before this step (a demo's stop button). */
  stopBefore?: number;
  /** Ctrl-C during this step. */
  interruptDuring?: number;
  /** Without a save hook, as in the demo. */
  noSave?: boolean;
}

/** A fake trainer that only counts steps; the run's events in order, as `step 3`, `validate test_freq @4`, `save final @5`. */
async function schedule(totalSteps: number, test_freq: number, save_freq: number, from = 0, fake: FakeRun = {}) {
  const trainer = { globalStep: from };
  const events: string[] = [];
  let requested = false;
  const hooks: RunLoopHooks = {
    step: async () => {
      trainer.globalStep++;
      events.push(`step ${trainer.globalStep}`);
      if (trainer.globalStep === fake.interruptDuring) requested = true;
    },
    validate: async (at) => void events.push(`validate ${at} @${trainer.globalStep}`),
    save: fake.noSave ? undefined : async (at) => void events.push(`save ${at} @${trainer.globalStep}`),
    beforeStep: async () => trainer.globalStep + 1 !== fake.stopBefore,
    watchInterrupt: () => ({ get requested() { return requested; }, dispose: () => void events.push('stop watching Ctrl-C') }),
  };
  const end = await runTrainingLoop(trainer, totalSteps, { test_freq, save_freq }, hooks);
  return { end, events };
}

const steps = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `step ${from + i}`);

describe('run loop', () => {
  it('validates every test_freq steps and saves every save_freq steps; at the end the final save, then the final validation', async () => {
    expect(await schedule(5, 2, 3)).toEqual({
      end: 'finished',
      events: ['step 1', 'step 2', 'validate test_freq @2', 'step 3', 'save save_freq @3', 'step 4', 'validate test_freq @4', 'step 5',
        'stop watching Ctrl-C', 'save final @5', 'validate final @5'],
    });
  });

  it('validates the last step once (the final validation) and saves it once (save_freq), save before validation', async () => {
    expect((await schedule(4, 2, 2)).events).toEqual(['step 1', 'step 2', 'validate test_freq @2', 'save save_freq @2', 'step 3', 'step 4',
      'save save_freq @4', 'stop watching Ctrl-C', 'validate final @4']);
  });

  it('test_freq and save_freq of 0 or -1 never validate or save mid-run (verl); the end still saves and validates', async () => {
    for (const [test_freq, save_freq] of [[0, 0], [-1, -1], [0, -1]]) {
      expect((await schedule(3, test_freq, save_freq)).events).toEqual([...steps(1, 3), 'stop watching Ctrl-C', 'save final @3', 'validate final @3']);
    }
  });

  it('counts test_freq and save_freq in global steps from a resumed step', async () => {
    expect((await schedule(6, 3, 4, 2)).events).toEqual(['step 3', 'validate test_freq @3', 'step 4', 'save save_freq @4', 'step 5', 'step 6',
      'stop watching Ctrl-C', 'save final @6', 'validate final @6']);
  });

  it('without a save hook (the demo) the same schedule validates and never saves', async () => {
    expect((await schedule(4, 2, 1, 0, { noSave: true })).events).toEqual([...steps(1, 2), 'validate test_freq @2', ...steps(3, 4),
      'stop watching Ctrl-C', 'validate final @4']);
  });

  it('a Ctrl-C finishes the step, saves it instead of validating it, and ends the run', async () => {
    expect(await schedule(6, 2, 2, 0, { interruptDuring: 2 })).toEqual({ end: 'interrupted', events: [...steps(1, 2), 'save interrupt @2', 'stop watching Ctrl-C'] });
  });

  it('a stop before a step ends the run without a save or a final validation', async () => {
    expect(await schedule(6, 2, 2, 0, { stopBefore: 3 })).toEqual({
      end: 'stopped', events: ['step 1', 'step 2', 'validate test_freq @2', 'save save_freq @2', 'stop watching Ctrl-C'],
    });
  });
});
