// The shape of a tool of verl's agent loop (verl/tools/base_tool.py), in JavaScript: a class built from its entry
// of the tool config file (`new Tool(config, toolSchema)`), with async create / execute / calc_reward / release,
// named as verl names them so a tool ports line for line. The agent loop creates an instance per call, executes
// it once and releases it, as verl's ToolAgentLoop._call_tool does.

/** OpenAI's function schema (verl.tools.schemas.OpenAIFunctionToolSchema): what the chat template shows the model. */
export interface ToolSchema {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** What a tool returns to the model (verl.tools.schemas.ToolResponse); only text is supported here. */
export interface ToolResponse {
  text?: string | null;
  image?: unknown;
  video?: unknown;
}

export interface AgentTool {
  /**
   * Starts an instance for one call; `kwargs.create_kwargs` is the row's extra_info.tools_kwargs[name].create_kwargs.
   */
  create(
    instanceId: string | null,
    kwargs: { create_kwargs?: Record<string, unknown> },
  ): Promise<[string, ToolResponse] | string>;
  /** Runs the call: the response the model reads, a step reward, and the tool's metrics. */
  execute(
    instanceId: string,
    parameters: Record<string, unknown>,
    kwargs: Record<string, unknown>,
  ): Promise<[ToolResponse, number, Record<string, unknown>]>;
  calc_reward(instanceId: string, kwargs?: Record<string, unknown>): Promise<number>;
  release(instanceId: string, kwargs?: Record<string, unknown>): Promise<void>;
}

/** One loaded tool of the config file: the name the model calls it by, its schema, its instance. */
export interface LoadedTool {
  name: string;
  schema: ToolSchema;
  tool: AgentTool;
  /** Bound on each of create, execute and release (config.timeout_s of its entry, default DEFAULT_TOOL_TIMEOUT_S). */
  timeoutMs: number;
}

/** A tool call that did not answer within its entry's timeout_s: counted as a timeout, not an error. */
export class ToolTimeout extends Error {}

/** verl's tools have no bound; here a tool that hangs becomes an error observation after this long. */
export const DEFAULT_TOOL_TIMEOUT_S = 30;

let instanceCounter = 0;

/** A fresh instance id, as verl's uuid4 (unique within the process is all a tool needs). */
export function newInstanceId(): string {
  instanceCounter += 1;
  return `instance-${Date.now().toString(36)}-${instanceCounter}`;
}
