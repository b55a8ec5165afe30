// custom_reward_function.{path,name}: a reward function from the user's JS/TS module, called as verl calls it:
// (data_source, solution_str, ground_truth, extra_info). It runs in a worker thread (custom-reward-worker-node.ts), so
// a call that does not return within custom_reward_function.timeout seconds stops the run, naming the call, even
// when it never gives the thread back (a synchronous loop, which no timer on the trainer's thread could interrupt):
// the worker is terminated. A call that throws is reported with the data_source, ground truth and response it
// was scoring, and stops the worker too. The calls made together (the trainer scores a step's responses at once)
// travel to the worker as one message.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { RewardCall, RewardFunction, RewardResult } from './index.ts';
import * as rlla from './rlla.ts';
import type { RewardWorkerCallReply, RewardWorkerData, RewardWorkerLoadReply } from './custom-reward-worker-node.ts';

const EXCERPT_CHARS = 80;

function excerpt(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS)}…` : text;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The call an error is about: "<where> (data_source "…", ground_truth …, extra_info.index …, response …)". */
function describeCall(where: string, { dataSource, solutionStr, groundTruth, extraInfo }: RewardCall): string {
  return (
    `${where} (data_source "${dataSource}", ground_truth ${excerpt(groundTruth)}` +
    `${extraInfo && 'index' in extraInfo ? `, extra_info.index ${excerpt(extraInfo.index)}` : ''}, response ` +
    `${excerpt(solutionStr)})`
  );
}

interface PendingCall {
  call: RewardCall;
  resolve: (result: RewardResult) => void;
  reject: (err: Error) => void;
}

/** The trainer's side of a loaded worker: sends calls in batches, times the one running, settles each by its reply. */
class RewardWorker {
  /** Calls made since the last message, sent together once the code making them yields (a microtask). */
  private unsent: PendingCall[] = [];
  /** Calls sent, in order; the worker is running the first. */
  private readonly sent: PendingCall[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Why the worker was stopped; every later call fails with it. */
  private stopped: Error | null = null;

  constructor(
    private readonly worker: Worker,
    private readonly where: string,
    private readonly timeoutSeconds: number,
  ) {
    worker.on('message', (reply: RewardWorkerCallReply) => this.settle(reply));
    worker.on('error', (err) => this.stop(new Error(`${this.running()} stopped its worker thread: ${messageOf(err)}`)));
    worker.on('exit', (code) => this.stop(new Error(`${this.running()} ended its worker thread (exit code ${code})`)));
    // An idle worker does not keep the process alive; a call waiting for it does, through its timeout. (After the
    // listeners: adding a 'message' listener refs the worker's port again.)
    worker.unref();
  }

  call(call: RewardCall): Promise<RewardResult> {
    if (this.stopped) return Promise.reject(this.stopped);
    return new Promise((resolve, reject) => {
      if (this.unsent.push({ call, resolve, reject }) === 1) queueMicrotask(() => this.send());
    });
  }

  private running(): string {
    return this.sent.length > 0 ? describeCall(this.where, this.sent[0].call) : this.where;
  }

  private send(): void {
    const batch = this.unsent;
    this.unsent = [];
    if (this.stopped) {
      for (const pending of batch) pending.reject(this.stopped);
      return;
    }
    try {
      this.worker.postMessage(batch.map((pending) => pending.call));
    } catch (err) {
      for (const pending of batch)
        pending.reject(
          new Error(
            `${describeCall(this.where, pending.call)} cannot be sent to the reward's worker thread: ${messageOf(err)}`,
          ),
        );
      return;
    }
    this.sent.push(...batch);
    if (this.sent.length === batch.length) this.startClock();
  }

  /** Times the call the worker is running now; its reply, or the timeout, ends the wait. */
  private startClock(): void {
    clearTimeout(this.timer);
    if (this.sent.length === 0) return;
    const running = this.sent[0].call;
    this.timer = setTimeout(
      () =>
        this.stop(
          new Error(
            `${describeCall(this.where, running)} did not return within ` +
              `custom_reward_function.timeout=${this.timeoutSeconds} s`,
          ),
        ),
      this.timeoutSeconds * 1000,
    );
  }

  private settle(reply: RewardWorkerCallReply): void {
    // Replies still queued when the worker was terminated: their calls have already failed.
    if (this.stopped) return;
    if (reply.kind === 'failed') {
      this.stop(new Error(`${describeCall(this.where, this.sent[0].call)} ${reply.reason}`));
      return;
    }
    const done = this.sent.shift()!;
    this.startClock();
    done.resolve(reply.result as RewardResult);
  }

  /**
   * Terminates the worker (a synchronous loop included) and fails every call not yet answered. Any failed call
   * stops the run, so the calls behind it need not run: left running, they would keep the process from exiting.
   */
  private stop(err: Error): void {
    if (this.stopped) return;
    this.stopped = err;
    clearTimeout(this.timer);
    void this.worker.terminate();
    for (const pending of this.sent.splice(0)) pending.reject(err);
  }
}

/** Starts the worker and waits until it has imported the module, or failed to, or its import ran past the timeout. */
async function startWorker(
  file: string,
  name: string,
  timeoutSeconds: number,
): Promise<{ worker: Worker; reply: Exclude<RewardWorkerLoadReply, { kind: 'importing' }> }> {
  const worker = new Worker(new URL('./custom-reward-worker-node.js', import.meta.url), {
    workerData: { url: pathToFileURL(file).href, name } satisfies RewardWorkerData,
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  let received: (reply: RewardWorkerLoadReply) => void = () => {};
  let failed: (err: unknown) => void = () => {};
  const exited = (code: number) => failed(new Error(`its worker thread ended (exit code ${code})`));
  try {
    const reply = await new Promise<Exclude<RewardWorkerLoadReply, { kind: 'importing' }>>((resolve, reject) => {
      failed = reject;
      received = (reply) => {
        if (reply.kind !== 'importing') return resolve(reply);
        timer = setTimeout(
          () =>
            reject(new Error(`importing it did not finish within custom_reward_function.timeout=${timeoutSeconds} s`)),
          timeoutSeconds * 1000,
        );
      };
      worker.on('message', received);
      worker.on('error', failed);
      worker.on('exit', exited);
    });
    return { worker, reply };
  } catch (err) {
    void worker.terminate();
    return { worker, reply: { kind: 'load-failed', message: messageOf(err) } };
  } finally {
    clearTimeout(timer);
    // Only this function's listeners: Node's Worker keeps internal ones, and dropping them loses replies.
    worker.off('message', received).off('error', failed).off('exit', exited);
  }
}

/** verl's own reward modules that its examples name by path (<verl>/verl/utils/reward_score/<module>.py), which run
 *  as this engine's ports instead of being loaded: rlla (the GDPO example's). Null for any other path. */
export function builtinRewardModule(path: string): RewardFunction | null {
  if (/(^|\/)verl\/utils\/reward_score\/rlla\.py$/.test(path))
    return (_dataSource, text, groundTruth, extraInfo) => rlla.computeScore(text, String(groundTruth), extraInfo);
  return null;
}

export async function loadCustomRewardFunction(config: {
  path: string;
  name: string;
  timeout: number;
}): Promise<RewardFunction> {
  const file = resolve(config.path.replace(/^~(?=$|\/)/, homedir()));
  if (!existsSync(file)) throw new Error(`custom_reward_function.path: ${file} does not exist`);
  const { worker, reply } = await startWorker(file, config.name, config.timeout);
  if (reply.kind === 'load-failed')
    throw new Error(`custom_reward_function.path: cannot load ${file}: ${reply.message}`);
  if (!reply.functions.includes(config.name)) {
    void worker.terminate();
    throw new Error(
      `custom_reward_function.name: ${file} exports no function "${config.name}"` +
        (reply.functions.length > 0
          ? ` (its functions: ${reply.functions.join(', ')}) — set custom_reward_function.name`
          : ''),
    );
  }
  const rewardWorker = new RewardWorker(worker, `custom_reward_function ${config.name} of ${file}`, config.timeout);
  return (dataSource, solutionStr, groundTruth, extraInfo) =>
    rewardWorker.call({ dataSource, solutionStr, groundTruth, extraInfo });
}
