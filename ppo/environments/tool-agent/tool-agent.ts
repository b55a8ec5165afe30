// verl's tool agent loop (verl/experimental/agent_loop/tool_agent_loop.py) as the multi-turn rollout's
// TurnEnvironment (ppo/generation/multi-turn.ts decodes; this decides). A model turn ends at an end token; its
// hermes tool calls (the first max_parallel_calls) run concurrently, each as create → execute → release, and
// their texts come back as `tool` messages rendered by the chat template (Qwen: a user turn of <tool_response>s
// and the next assistant header) — appended as observation tokens, out of the loss. No call, the turn budget or
// the response budget ends the response. A tool that throws, hangs past its timeout or returns no text, and a
// call the model wrote wrong, give the model verl's "Error when executing tool: …" and are counted; the run goes on.
import type { Tokenizer } from '../../../models/tokenizer.ts';
import type { ChatTemplate } from '../../../models/chat-template.ts';
import type { TurnEnd, TurnEnvironment } from '../../generation/types.ts';
import { ToolTimeout, type LoadedTool, type ToolSchema } from './agent-tool.ts';
import { parseHermesToolCalls, type ToolCall } from './hermes-tool-calls.ts';

export type TruncateSide = 'left' | 'middle' | 'right';

export interface ToolAgentSettings {
  maxAssistantTurns: number;
  maxUserTurns: number | null;
  maxParallelCalls: number;
  /** Characters, as verl cuts them. */
  maxToolResponseLength: number;
  truncateSide: TruncateSide;
}

/** The tools of a run and how their answers are written into the conversation. */
export interface ToolAgent {
  tools: ReadonlyMap<string, LoadedTool>;
  /** The `tools=` of the chat template, in the config file's order. */
  schemas: ToolSchema[];
  settings: ToolAgentSettings;
  tokenizer: Pick<Tokenizer, 'encode' | 'decode'>;
  template: ChatTemplate;
}

/** The actor_rollout_ref.rollout.multi_turn.* keys, as the config spells them (the config fits). */
export interface ToolAgentOptions {
  actor_rollout_ref: {
    rollout: {
      multi_turn: {
        max_assistant_turns: number | null;
        max_user_turns: number | null;
        max_parallel_calls: number;
        max_tool_response_length: number;
        tool_response_truncate_side: TruncateSide;
      };
    };
  };
  data: { max_response_length: number };
}

/** actor_rollout_ref.rollout.multi_turn.*; max_assistant_turns null is data.max_response_length // 3, as verl's
 *  SGLang rollout bounds it (every later turn sizes the decode cache). */
export function toolAgentSettings(config: ToolAgentOptions): ToolAgentSettings {
  const m = config.actor_rollout_ref.rollout.multi_turn;
  return {
    maxAssistantTurns: m.max_assistant_turns ?? Math.max(1, Math.floor(config.data.max_response_length / 3)),
    maxUserTurns: m.max_user_turns,
    maxParallelCalls: m.max_parallel_calls,
    maxToolResponseLength: m.max_tool_response_length,
    truncateSide: m.tool_response_truncate_side,
  };
}

/** verl's cut of an overlong tool text (its names: left keeps the start, right the end, middle both ends). */
export function truncateToolResponse(text: string, max: number, side: TruncateSide): string {
  if (text.length <= max) return text;
  if (side === 'left') return `${text.slice(0, max)}...(truncated)`;
  if (side === 'right') return `(truncated)...${text.slice(text.length - max)}`;
  const half = Math.floor(max / 2);
  return `${text.slice(0, half)}...(truncated)...${text.slice(text.length - half)}`;
}

/**
 * The chat template's text for messages appended mid-conversation, generation prompt included: rendered alone,
 * less the default system prompt a template adds to a conversation without one (verl's remove_system_prompt, which
 * finds it as initialize_system_prompt does: one empty user turn rendered, less what a second one adds).
 */
export function appendedMessagesText(template: ChatTemplate, messages: { role: string; content: string }[]): string {
  const one = template.render([{ role: 'user', content: '' }]);
  const two = template.render([
    { role: 'user', content: '' },
    { role: 'user', content: '' },
  ]);
  const systemPrompt = one.slice(0, one.length - (two.length - one.length));
  const text = template.render(messages, { addGenerationPrompt: true });
  return text.startsWith(systemPrompt) ? text.slice(systemPrompt.length) : text;
}

export type ToolFailure = 'malformed' | 'error' | 'timeout' | 'non_text';

async function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ToolTimeout(`${what} did not answer within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A call's text for the model, and what went wrong if anything. */
export interface ToolCallResult {
  text: string;
  failure: ToolFailure | null;
  seconds: number;
}

const errorText = (message: string) => `Error when executing tool: ${message}`;

/** verl's _call_tool, with every failure turned into the text the model reads. */
export async function callTool(
  agent: Pick<ToolAgent, 'tools' | 'settings'>,
  call: ToolCall,
  toolsKwargs: Record<string, unknown>,
): Promise<ToolCallResult> {
  const started = performance.now();
  const done = (text: string, failure: ToolFailure | null): ToolCallResult => ({
    text,
    failure,
    seconds: (performance.now() - started) / 1000,
  });
  if ('malformed' in call) return done(errorText(call.malformed), 'malformed');
  const loaded = agent.tools.get(call.name);
  if (!loaded)
    return done(
      errorText(`no tool named ${JSON.stringify(call.name)} (tools: ${[...agent.tools.keys()].join(', ') || 'none'})`),
      'malformed',
    );
  const required = loaded.schema.function.parameters?.required;
  const missing = Array.isArray(required)
    ? required.filter((key) => typeof key === 'string' && !(key in call.arguments))
    : [];
  if (missing.length > 0)
    return done(errorText(`${call.name} needs the argument(s) ${missing.join(', ')}`), 'malformed');
  const kwargs = toolsKwargs[call.name];
  const createKwargs =
    (kwargs !== null && typeof kwargs === 'object' ? (kwargs as Record<string, unknown>).create_kwargs : undefined) ??
    {};
  const { tool, timeoutMs } = loaded;
  let instanceId: string | null = null;
  let result: ToolCallResult;
  try {
    const created = await bounded(
      Promise.resolve(tool.create(null, { create_kwargs: createKwargs as Record<string, unknown> })),
      timeoutMs,
      `${call.name}.create`,
    );
    instanceId = Array.isArray(created) ? created[0] : created;
    const executed = await bounded(
      Promise.resolve(tool.execute(instanceId!, call.arguments, {})),
      timeoutMs,
      `${call.name}.execute`,
    );
    const response: unknown = Array.isArray(executed) ? executed[0] : executed;
    const text = typeof response === 'string' ? response : (response as { text?: unknown } | null)?.text;
    const media =
      response !== null &&
      typeof response === 'object' &&
      ((response as { image?: unknown }).image != null || (response as { video?: unknown }).video != null);
    result =
      typeof text === 'string' && !media
        ? done(truncateToolResponse(text, agent.settings.maxToolResponseLength, agent.settings.truncateSide), null)
        : done(
            errorText(
              `${call.name} returned ${media ? 'an image or video' : JSON.stringify(response)}; only text is supported`,
            ),
            'non_text',
          );
  } catch (err) {
    result = done(
      errorText(err instanceof Error ? err.message : String(err)),
      err instanceof ToolTimeout ? 'timeout' : 'error',
    );
  }
  if (instanceId !== null) {
    try {
      await bounded(Promise.resolve(tool.release(instanceId)), timeoutMs, `${call.name}.release`);
    } catch (err) {
      // The model already has its answer; a failed release is still a failure of the tool, counted.
      if (result.failure === null) result = { ...result, failure: err instanceof ToolTimeout ? 'timeout' : 'error' };
    }
  }
  return result;
}

interface SampleStats {
  assistantTurns: number;
  userTurns: number;
  toolCalls: number;
  toolSeconds: number;
}

/** One rollout's tool agent: the environment the rollout calls, and verl's agent-loop metrics of its samples. */
export class ToolAgentSession implements TurnEnvironment {
  readonly maxTurns: number;
  readonly turnEndTokenIds: readonly number[] = [];
  readonly turnEndStrings: readonly string[] = [];
  private readonly stats: SampleStats[];
  private readonly failures: Record<ToolFailure, number> = { malformed: 0, error: 0, timeout: 0, non_text: 0 };

  /**
   * `toolsKwargs(sample)`: the sample's row's extra_info.tools_kwargs ({tool name: {create_kwargs}});
   * `maxResponseLength`:
   *  the response budget, which a tool message must leave room in. */
  constructor(
    private readonly agent: ToolAgent,
    samples: number,
    private readonly toolsKwargs: (sample: number) => Record<string, unknown>,
    private readonly maxResponseLength: number,
  ) {
    const { maxAssistantTurns, maxUserTurns } = agent.settings;
    this.maxTurns = maxUserTurns === null ? maxAssistantTurns : Math.min(maxAssistantTurns, maxUserTurns + 1);
    this.stats = Array.from({ length: samples }, () => ({
      assistantTurns: 0,
      userTurns: 0,
      toolCalls: 0,
      toolSeconds: 0,
    }));
  }

  async observe(turn: number, ended: readonly TurnEnd[]): Promise<(number[] | null)[]> {
    return Promise.all(
      ended.map(async (end) => {
        const stats = this.stats[end.sample];
        stats.assistantTurns++;
        // verl ends at the response budget, the assistant-turn limit, the user-turn limit, or a turn with no call.
        if (end.reason === 'length' || turn + 1 >= this.maxTurns) return null;
        const text = await this.agent.tokenizer.decode(end.tokens, { skipSpecialTokens: false });
        const calls = parseHermesToolCalls(text).slice(0, this.agent.settings.maxParallelCalls);
        if (calls.length === 0) return null;
        const results = await Promise.all(
          calls.map((call) => callTool(this.agent, call, this.toolsKwargs(end.sample))),
        );
        stats.toolCalls += calls.length;
        stats.toolSeconds += Math.max(...results.map((r) => r.seconds));
        for (const r of results) if (r.failure) this.failures[r.failure]++;
        const messages = results.map((r) => ({ role: 'tool', content: r.text }));
        const ids = await this.agent.tokenizer.encode(appendedMessagesText(this.agent.template, messages), {
          addSpecialTokens: false,
        });
        // verl ends the response, not counting a user turn, when the tool messages leave no room for an answer.
        if (end.responseLength + ids.length >= this.maxResponseLength) return null;
        stats.userTurns++;
        return ids;
      }),
    );
  }

  /** verl's num_turns/* (user turns + assistant turns + 1) and tool_call_counts/* (trainer/ppo/metric_utils.py),
   *  agent_loop/tool_calls/* (seconds per sample in tool calls, agent_loop.py), and per-batch failure counts. */
  metrics(): Record<string, number> {
    const summary = (name: string, values: number[]) => ({
      [`${name}/min`]: Math.min(...values),
      [`${name}/max`]: Math.max(...values),
      [`${name}/mean`]: values.reduce((a, b) => a + b, 0) / values.length,
    });
    return {
      ...summary(
        'num_turns',
        this.stats.map((s) => s.userTurns + s.assistantTurns + 1),
      ),
      ...summary(
        'tool_call_counts',
        this.stats.map((s) => s.toolCalls),
      ),
      ...summary(
        'agent_loop/tool_calls',
        this.stats.map((s) => s.toolSeconds),
      ),
      ...Object.fromEntries(Object.entries(this.failures).map(([kind, n]) => [`tool_call_failures/${kind}`, n])),
    };
  }
}
