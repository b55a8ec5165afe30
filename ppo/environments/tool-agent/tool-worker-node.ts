// The thread a custom tool runs in (entry tool-worker-node.js, started by tool-thread-node.ts): it imports the
// user's module, builds the tool from its config entry (verl's `Tool(config, tool_schema)`), then answers each
// method call by its id. A call that never gives the thread back (a synchronous loop) blocks only this thread, so
// the trainer's thread still times it (the entry's timeout_s) and still handles a stop signal.
import { parentPort, workerData } from 'node:worker_threads';

export interface ToolWorkerData {
  /** file: URL of the user's module. */
  url: string;
  /** The export that is the tool class ('default' for the module's default export). */
  exported: string;
  config: Record<string, unknown>;
  schema: unknown;
}

export const TOOL_METHODS = ['create', 'execute', 'calc_reward', 'release'] as const;
export type ToolMethod = (typeof TOOL_METHODS)[number];

/** The worker's first message: the tool was built, or why not (one line, completing "<where>.class_name: …"). */
export type ToolWorkerLoadReply = { kind: 'loaded' } | { kind: 'load-failed'; message: string };
export interface ToolWorkerCall {
  id: number;
  method: ToolMethod;
  args: unknown[];
}
export type ToolWorkerCallReply =
  | { id: number; kind: 'returned'; value: unknown }
  | { id: number; kind: 'failed'; message: string };

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The tool the entry names, or the line saying why it cannot be built. */
async function buildTool({ url, exported, config, schema }: ToolWorkerData): Promise<Record<string, unknown> | string> {
  let module: Record<string, unknown>;
  try {
    module = await import(url);
  } catch (err) {
    return `cannot import ${url}: ${messageOf(err)}`;
  }
  const ToolClass = module[exported];
  if (typeof ToolClass !== 'function')
    return `exports no class ${exported} (exports: ${Object.keys(module).join(', ') || 'none'})`;
  let tool: Record<string, unknown>;
  try {
    tool = new (ToolClass as new (c: unknown, s: unknown) => Record<string, unknown>)(config, schema);
  } catch (err) {
    return `the constructor of ${exported} threw: ${messageOf(err)}`;
  }
  const missing = TOOL_METHODS.filter((m) => typeof tool[m] !== 'function');
  if (missing.length > 0)
    return `${exported} lacks ${missing.join(', ')} (a tool has verl's create / execute / calc_reward / release)`;
  return tool;
}

async function serve(port: NonNullable<typeof parentPort>, data: ToolWorkerData): Promise<void> {
  const tool = await buildTool(data);
  if (typeof tool === 'string') {
    port.postMessage({ kind: 'load-failed', message: tool } satisfies ToolWorkerLoadReply);
    return;
  }
  port.postMessage({ kind: 'loaded' } satisfies ToolWorkerLoadReply);
  port.on('message', async ({ id, method, args }: ToolWorkerCall) => {
    let reply: ToolWorkerCallReply;
    try {
      reply = { id, kind: 'returned', value: await (tool[method] as (...a: unknown[]) => unknown)(...args) };
    } catch (err) {
      reply = { id, kind: 'failed', message: messageOf(err) };
    }
    try {
      port.postMessage(reply);
    } catch (err) {
      // A result holding a function or a class instance with private state cannot cross threads.
      port.postMessage({
        id,
        kind: 'failed',
        message: `${method} returned a value that cannot be passed back to the trainer (${messageOf(err)})`,
      } satisfies ToolWorkerCallReply);
    }
  });
}

await serve(parentPort!, workerData as ToolWorkerData);
