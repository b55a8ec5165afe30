// A custom tool (a JS/TS module of the user's) runs in a worker thread of its own (tool-worker-node.ts), as custom
// reward functions do: a call that never gives its thread back, even a synchronous loop, blocks only that thread,
// so the call's timeout_s still fires (the worker is terminated, the call counted as a timeout: the model reads
// verl's "Error when executing tool: …") and a stop signal is still handled. The next call starts a fresh worker
// (a fresh tool instance: verl's tools keep per-instance state only between create and release). Built-in tools
// are the engine's own code and run on the trainer's thread.
import { Worker } from 'node:worker_threads';
import { ToolTimeout, type AgentTool } from './agent-tool.ts';
import type {
  ToolMethod,
  ToolWorkerCall,
  ToolWorkerCallReply,
  ToolWorkerData,
  ToolWorkerLoadReply,
} from './tool-worker-node.ts';

interface PendingCall {
  method: ToolMethod;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

class ToolThread {
  private worker: Promise<Worker> | null = null;
  /** The worker `worker` resolved to, once it has. */
  private current: Worker | null = null;
  private readonly pending = new Map<number, PendingCall>();
  private nextId = 0;

  constructor(
    private readonly data: ToolWorkerData,
    /** The name the model calls the tool by: calls are named `<name>.<method>`, as the agent loop names them. */
    private readonly name: string,
    private readonly timeoutMs: number,
  ) {}

  /** The running worker, started (the module imported, the tool built) if there is none. */
  ready(): Promise<Worker> {
    this.worker ??= this.start().catch((err) => {
      this.worker = null;
      throw err;
    });
    return this.worker;
  }

  /** Workers terminated here: their exit is expected, not a failure of the calls made since. */
  private readonly stopped = new WeakSet<Worker>();

  private async start(): Promise<Worker> {
    const worker = new Worker(new URL('./tool-worker-node.js', import.meta.url), { workerData: this.data });
    let received: (reply: ToolWorkerLoadReply) => void = () => {};
    let failed: (err: unknown) => void = () => {};
    const exited = (code: number) => failed(new Error(`its worker thread ended while loading (exit code ${code})`));
    const reply = await new Promise<ToolWorkerLoadReply>((resolve, reject) => {
      received = resolve;
      failed = reject;
      worker.on('message', received).on('error', failed).on('exit', exited);
    }).catch((err) => ({ kind: 'load-failed', message: messageOf(err) }) as const);
    // Only these listeners: Node's Worker keeps internal ones, and dropping them loses replies.
    worker.off('message', received).off('error', failed).off('exit', exited);
    if (reply.kind === 'load-failed') {
      void worker.terminate();
      throw new Error(reply.message);
    }
    worker.on('message', (r: ToolWorkerCallReply) => this.settle(r));
    worker.on('error', (err) => this.stop(worker, null, new Error(`its worker thread failed: ${messageOf(err)}`)));
    worker.on('exit', (code) => this.stop(worker, null, new Error(`its worker thread ended (exit code ${code})`)));
    // An idle tool does not keep the process alive; a call waiting for it does, through its timeout.
    worker.unref();
    this.current = worker;
    return worker;
  }

  async call(method: ToolMethod, args: unknown[]): Promise<unknown> {
    const worker = await this.ready().catch((err) => {
      throw new Error(`${this.name}.${method}: cannot restart its worker thread: ${messageOf(err)}`);
    });
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          this.stop(
            worker,
            id,
            new ToolTimeout(`${this.name}.${method} did not answer within ${this.timeoutMs / 1000} s`),
          ),
        this.timeoutMs,
      );
      this.pending.set(id, { method, resolve, reject, timer });
      try {
        worker.postMessage({ id, method, args } satisfies ToolWorkerCall);
      } catch (err) {
        this.finish(id)?.reject(new Error(`${this.name}.${method}: its arguments cannot be sent (${messageOf(err)})`));
      }
    });
  }

  private finish(id: number): PendingCall | undefined {
    const call = this.pending.get(id);
    if (call) {
      clearTimeout(call.timer);
      this.pending.delete(id);
    }
    return call;
  }

  private settle(reply: ToolWorkerCallReply): void {
    const call = this.finish(reply.id);
    if (!call) return;
    if (reply.kind === 'returned') call.resolve(reply.value);
    else call.reject(new Error(reply.message));
  }

  /**
   * Terminates `worker` (a synchronous loop included): call `culprit` fails with `err`, every other call waiting on
   * the same worker fails naming it. The next call starts a fresh worker.
   */
  private stop(worker: Worker, culprit: number | null, err: Error): void {
    if (this.stopped.has(worker)) return;
    if (this.current === worker) {
      this.current = null;
      this.worker = null;
    }
    this.stopped.add(worker);
    void worker.terminate();
    for (const id of [...this.pending.keys()]) {
      const call = this.finish(id)!;
      if (id === culprit) call.reject(err);
      else if (culprit === null) call.reject(new Error(`${this.name}.${call.method}: ${err.message}`));
      else call.reject(new Error(`${this.name}.${call.method}: stopped with its worker thread (${err.message})`));
    }
  }
}

/**
 * The tool class `exported` of the module at `url`, built from its config entry in a worker thread; rejects with the
 * line saying why it cannot be built (the import failed, no such class, its constructor threw, a method missing).
 */
export async function startToolThread(data: ToolWorkerData, name: string, timeoutMs: number): Promise<AgentTool> {
  const thread = new ToolThread(data, name, timeoutMs);
  await thread.ready();
  const method =
    (m: ToolMethod) =>
    (...args: unknown[]) =>
      thread.call(m, args);
  return {
    create: method('create') as AgentTool['create'],
    execute: method('execute') as AgentTool['execute'],
    calc_reward: method('calc_reward') as AgentTool['calc_reward'],
    release: method('release') as AgentTool['release'],
  };
}
