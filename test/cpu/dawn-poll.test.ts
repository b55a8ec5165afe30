// engine/dawn-poll.ts: while the engine awaits a Dawn operation, only the binding's own polls (anonymous native
// functions) move to a timer, after a grace period (at once for a wait awaited later); everyone else's setImmediate
// runs as before, and the global comes back afterwards.
import { afterEach, describe, it, expect, vi } from 'vitest';
import { awaitDawn } from '../../engine/dawn-poll.ts';

const immediate = globalThis.setImmediate;

describe('awaitDawn', () => {
  afterEach(() => vi.restoreAllMocks());

  it('restores setImmediate after nested and overlapping waits, and leaves it alone when not patient', async () => {
    let release!: () => void;
    const slow = new Promise<void>((resolve) => (release = resolve));
    const outer = awaitDawn(slow, true);
    expect(globalThis.setImmediate).not.toBe(immediate);
    const inner = awaitDawn(Promise.resolve(7), true);
    expect(await inner).toBe(7);
    expect(globalThis.setImmediate).not.toBe(immediate);
    release();
    await outer;
    expect(globalThis.setImmediate).toBe(immediate);
    const plain = awaitDawn(new Promise<number>((resolve) => immediate(() => resolve(3))), false);
    expect(globalThis.setImmediate).toBe(immediate);
    expect(await plain).toBe(3);
  });

  it(
    "sends only anonymous native callbacks (the binding's polls) to a timer, once a wait is past its grace " + 'period',
    async () => {
      // The grace period (0.5 ms) on a clock the test moves: a loaded machine may pause this thread for longer
      // between any two lines, which would move the poll to the timer early.
      let now = 1000;
      vi.spyOn(performance, 'now').mockImplementation(() => now);
      let release!: () => void;
      const wait = awaitDawn(new Promise<void>((resolve) => (release = resolve)), true);
      const kind = (handle: unknown) => (handle as object).constructor.name;
      const immediateKind = kind(immediate(() => {}));
      const timerKind = kind(setTimeout(() => {}, 0));
      expect(kind(globalThis.setImmediate(() => {}))).toBe(immediateKind);
      // Function.prototype is an anonymous native function, as the binding's polls are: immediate within the
      // grace period, on a timer after it.
      const poll = Function.prototype as () => void;
      expect(kind(globalThis.setImmediate(poll))).toBe(immediateKind);
      now += 0.4;
      expect(kind(globalThis.setImmediate(poll))).toBe(immediateKind);
      now += 0.2;
      expect(kind(globalThis.setImmediate(poll))).toBe(timerKind);
      expect(kind(globalThis.setImmediate(() => {}))).toBe(immediateKind);
      release();
      await wait;
      expect(kind(globalThis.setImmediate(poll))).toBe(immediateKind);
    },
  );

  it("sends the binding's polls to the timer at once for a wait that is not graceful (awaited later)", async () => {
    // Past the grace period of any wait an earlier test began on its own mocked clock.
    let now = 10_000;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    let release!: () => void;
    const wait = awaitDawn(new Promise<void>((resolve) => (release = resolve)), true, false);
    const kind = (handle: unknown) => (handle as object).constructor.name;
    const immediateKind = kind(immediate(() => {}));
    const timerKind = kind(setTimeout(() => {}, 0));
    const poll = Function.prototype as () => void;
    expect(kind(globalThis.setImmediate(poll))).toBe(timerKind);
    expect(kind(globalThis.setImmediate(() => {}))).toBe(immediateKind);
    // A graceful wait that starts meanwhile opens its own grace period.
    const graceful = awaitDawn(Promise.resolve(), true);
    expect(kind(globalThis.setImmediate(poll))).toBe(immediateKind);
    await graceful;
    now += 0.6;
    expect(kind(globalThis.setImmediate(poll))).toBe(timerKind);
    release();
    await wait;
    expect(globalThis.setImmediate).toBe(immediate);
  });

  it('rethrows a failed operation and still restores setImmediate', async () => {
    await expect(awaitDawn(Promise.reject(new Error('mapAsync failed')), true)).rejects.toThrow('mapAsync failed');
    expect(globalThis.setImmediate).toBe(immediate);
  });
});
