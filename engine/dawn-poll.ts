// Waiting on Dawn's node binding (the `webgpu` package) without spinning a core. A pending mapAsync or
// onSubmittedWorkDone completes only when the binding polls the device: it queues a poll with the global
// setImmediate, and the poll queues the next one until the operation resolves, so the host runs polls flat out
// for as long as it waits. On a CPU device (lavapipe) that core is one the device's own threads need: at load ~3
// a tiny-model decode step took 7.8–13.5 ms with the spinning poll and 4.8–6.4 ms with a 1 ms timer.
// While the engine awaits such an operation, the binding's polls go to a 1 ms timer once the wait is GRACE_MS
// old: a short one (a small read right after its dispatch) still completes at the speed of the spin (a
// dispatch + read round trip: 0.29 ms, against 1.02 ms with the timer from the start). The binding looks
// setImmediate up at every poll; its polls are anonymous native functions, which is how they are told apart
// from anyone else's setImmediate during the wait (those pass through).

// Typed by hand: the demo's typecheck has no Node types, and a browser has no setImmediate.
type Schedule = (callback: (...args: unknown[]) => void, ...args: unknown[]) => unknown;
const host = globalThis as unknown as {
  setImmediate?: Schedule;
  setTimeout: (callback: (...args: unknown[]) => void, ms: number, ...args: unknown[]) => unknown;
};

const POLL_INTERVAL_MS = 1;
const GRACE_MS = 0.5;

let waiting = 0;
let original: Schedule | null = null;
/** When the latest wait began (performance.now()). */
let latestStart = 0;

function isNativeAnonymous(callback: unknown): boolean {
  return (
    typeof callback === 'function' &&
    callback.name === '' &&
    Function.prototype.toString.call(callback).includes('[native code]')
  );
}

function throttledImmediate(callback: (...args: unknown[]) => void, ...args: unknown[]): unknown {
  if (isNativeAnonymous(callback) && performance.now() - latestStart > GRACE_MS)
    return host.setTimeout(callback, POLL_INTERVAL_MS, ...args);
  return original!(callback, ...args);
}

/**
 * Awaits a Dawn operation; with `patient`, the binding polls every millisecond meanwhile instead of spinning, after
 * the grace period unless `graceful` is false: a read the caller awaits only after recording more work (a decode
 * loop's per-step read, awaited a step later) gains nothing from spinning while that work is recorded, and a server
 * that spun for each step's read ran ~2,000 polls (event-loop turns) per 1,000 tokens on the core the device needs.
 */
export async function awaitDawn<T>(operation: Promise<T>, patient: boolean, graceful = true): Promise<T> {
  if (!patient || typeof host.setImmediate !== 'function') return operation;
  if (graceful) latestStart = performance.now();
  if (waiting++ === 0) {
    original = host.setImmediate;
    host.setImmediate = throttledImmediate;
  }
  try {
    return await operation;
  } finally {
    if (--waiting === 0) {
      host.setImmediate = original!;
      original = null;
    }
  }
}
