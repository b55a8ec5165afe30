// The thread a custom reward function runs in (entry custom-reward-worker-node.js, started by custom-reward-node.ts).
// A call that never returns, even a synchronous loop, blocks only this thread, so the trainer's thread can stop
// it at custom_reward_function.timeout. The user's module is imported once; each message from the trainer is a
// batch of calls, answered in order one reply per call, so the trainer times every call and can name the one
// that did not return. Calls run one at a time, as verl's reward manager makes them.
import { parentPort, workerData } from 'node:worker_threads';
import type { RewardCall } from './index.ts';

export interface RewardWorkerData {
  /** file: URL of the user's module. */
  url: string;
  name: string;
}

/**
 * The worker's first messages: that it is importing the module (its own start and loader are not the module's
 * time), then whether the module loaded, with the names of the functions it exports.
 */
export type RewardWorkerLoadReply =
  | { kind: 'importing' }
  | { kind: 'loaded'; functions: string[] }
  | { kind: 'load-failed'; message: string };

/** Then one reply per call; `reason` completes "<call> …": "threw: …" or why the result could not be sent back. */
export type RewardWorkerCallReply = { kind: 'returned'; result: unknown } | { kind: 'failed'; reason: string };

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function answer(
  fn: (...args: unknown[]) => unknown,
  calls: readonly RewardCall[],
  port: NonNullable<typeof parentPort>,
): Promise<void> {
  for (const call of calls) {
    let reply: RewardWorkerCallReply;
    try {
      reply = {
        kind: 'returned',
        result: await fn(call.dataSource, call.solutionStr, call.groundTruth, call.extraInfo),
      };
    } catch (err) {
      reply = { kind: 'failed', reason: `threw: ${messageOf(err)}` };
    }
    try {
      port.postMessage(reply);
    } catch (err) {
      // A result holding a function or a class instance with private state cannot cross threads.
      port.postMessage({
        kind: 'failed',
        reason: `returned a value that cannot be passed back to the trainer (${messageOf(err)})`,
      } satisfies RewardWorkerCallReply);
    }
  }
}

async function serve(port: NonNullable<typeof parentPort>, { url, name }: RewardWorkerData): Promise<void> {
  let module: Record<string, unknown>;
  port.postMessage({ kind: 'importing' } satisfies RewardWorkerLoadReply);
  // A module whose top-level await never settles leaves this thread nothing to wait for, and Node would end it
  // (exit code 13) before the trainer's import timeout could name the cause: a timer keeps it waiting instead.
  const waitForImport = setInterval(() => {}, 2 ** 30);
  try {
    module = await import(url);
  } catch (err) {
    port.postMessage({ kind: 'load-failed', message: messageOf(err) } satisfies RewardWorkerLoadReply);
    return;
  } finally {
    clearInterval(waitForImport);
  }
  port.postMessage({
    kind: 'loaded',
    functions: Object.keys(module).filter((k) => typeof module[k] === 'function'),
  } satisfies RewardWorkerLoadReply);
  const fn = module[name];
  if (typeof fn !== 'function') return;
  let previous = Promise.resolve();
  port.on('message', (calls: RewardCall[]) => {
    // A batch that arrives while an async call of the previous one is pending waits its turn: replies stay in order.
    previous = previous.then(() => answer(fn as (...args: unknown[]) => unknown, calls, port));
  });
}

await serve(parentPort!, workerData as RewardWorkerData);
