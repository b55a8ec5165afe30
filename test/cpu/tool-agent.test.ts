// verl's tool agent loop as a TurnEnvironment (ppo/environments/tool-agent/): hermes tool-call parsing, verl's tool
// config file and JS tools, the GSM8K tool's answers, the tool messages rendered by the chat template (the default
// system prompt removed), and every failure — a malformed call, a tool that throws, hangs or returns no text — turned
// into an error observation and counted, never a crash.
import { describe, it, expect, vi } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ChatTemplate } from '../../models/chat-template.ts';
import { QWEN25_TEMPLATE, QWEN_SPECIAL } from '../support/qwen-chat-template.ts';
import { parseHermesToolCalls } from '../../ppo/environments/tool-agent/hermes-tool-calls.ts';
import { parseToolConfig } from '../../ppo/environments/tool-agent/tool-config.ts';
import { loadTools } from '../../ppo/environments/tool-agent/tool-loader-node.ts';
import {
  ToolAgentSession,
  appendedMessagesText,
  truncateToolResponse,
  type ToolAgent,
  type ToolAgentSettings,
} from '../../ppo/environments/tool-agent/tool-agent.ts';
import type { AgentTool, LoadedTool, ToolSchema } from '../../ppo/environments/tool-agent/agent-tool.ts';
import { makeTempDir } from '../support/temp-dir.ts';
import { VERL_B178A3CD_ROOT } from '../support/verl-script-argv.ts';

/** verl b178a3cd's own GSM8K tool config (byte for byte). */
const GSM8K_TOOLS = `${VERL_B178A3CD_ROOT}/examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml`;

const template = new ChatTemplate({ chat_template: QWEN25_TEMPLATE }, QWEN_SPECIAL);
/** One id per UTF-16 unit: text in, text out, so observations read back exactly. */
const charTokenizer = {
  encode: async (text: string) => Array.from(text, (c) => c.charCodeAt(0)),
  decode: async (ids: readonly number[]) => String.fromCharCode(...ids),
};
const SETTINGS: ToolAgentSettings = {
  maxAssistantTurns: 3,
  maxUserTurns: null,
  maxParallelCalls: 1,
  maxToolResponseLength: 256,
  truncateSide: 'middle',
};

function schema(name: string, required: string[] = []): ToolSchema {
  return {
    type: 'function',
    function: { name, description: name, parameters: { type: 'object', properties: {}, required } },
  };
}

function scripted(name: string, execute: AgentTool['execute'], timeoutMs = 1000): LoadedTool {
  return {
    name,
    schema: schema(name),
    timeoutMs,
    tool: { create: async () => ['id', {}], execute, calc_reward: async () => 0, release: async () => {} },
  };
}

function agentWith(tools: LoadedTool[], settings: Partial<ToolAgentSettings> = {}): ToolAgent {
  return {
    tools: new Map(tools.map((t) => [t.name, t])),
    schemas: tools.map((t) => t.schema),
    settings: { ...SETTINGS, ...settings },
    tokenizer: charTokenizer,
    template,
  };
}

const call = (name: string, args: object) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;
const ids = (text: string) => Array.from(text, (c) => c.charCodeAt(0));
const end = (sample: number, text: string, reason: 'eos' | 'length' = 'eos') => ({
  sample,
  tokens: ids(text),
  reason,
  responseLength: text.length,
});
const read = (observation: number[] | null) => (observation === null ? null : String.fromCharCode(...observation));

describe('hermes tool calls', () => {
  it('reads every call of a turn; a call with bad JSON, no name or no arguments object is kept as malformed', () => {
    const text = `I will check. ${call('calc', { answer: '3' })} and ${call('search', { query_list: ['a'] })}`;
    expect(parseHermesToolCalls(text)).toEqual([
      { name: 'calc', arguments: { answer: '3' } },
      { name: 'search', arguments: { query_list: ['a'] } },
    ]);
    const bad = parseHermesToolCalls(
      '<tool_call>{"name": "calc", "arguments": {</tool_call><tool_call>{"arguments": ' +
        '{}}</tool_call><tool_call>{"name": "x", "arguments": "3"}</tool_call>',
    );
    expect(bad).toHaveLength(3);
    expect(bad.every((c) => 'malformed' in c)).toBe(true);
    expect((bad[0] as { malformed: string }).malformed).toContain('not JSON');
    expect(parseHermesToolCalls('no call <tool_call>{"name": "calc"')).toEqual([]);
  });
});

describe('tool config', () => {
  it("loads verl's GSM8K tool config as written: the built-in tool, verl's schema", async () => {
    const [tool] = await loadTools(GSM8K_TOOLS);
    expect(tool.name).toBe('calc_gsm8k_reward');
    expect(tool.schema.function.parameters?.required).toEqual(['answer']);
    const [id] = (await tool.tool.create(null, { create_kwargs: { ground_truth: '72' } })) as [string, unknown];
    expect(await tool.tool.execute(id, { answer: '72' }, {})).toEqual([
      { text: "Current parsed answer='72' reward=1.0" },
      0,
      {},
    ]);
    // verl's penalty: a submission that does not improve on the last.
    expect(await tool.tool.execute(id, { answer: '#### 71' }, {})).toEqual([
      { text: "Current parsed answer='#### 71' reward=0.0" },
      -0.05,
      {},
    ]);
    await tool.tool.release(id);
  });

  it('loads a JS tool by path:ClassName; bad entries name the file, the entry and the field', async () => {
    const dir = await makeTempDir('tools-');
    await writeFile(
      join(dir, 'echo.mjs'),
      'export class Echo { constructor(config) { this.config = config; } async create() { return ["i", {}]; } ' +
        'async execute(id, p) { return [{ text: this.config.prefix + p.text }, 0, {}]; } async calc_reward() { ' +
        'return 0; } async release() {} }\n',
    );
    const yaml = (className: string) =>
      `tools:\n  - class_name: ${className}\n    config: {prefix: "echo: ", timeout_s: 2}\n    tool_schema:\n      ` +
      `type: function\n      function: {name: echo, parameters: {type: object}}\n`;
    await writeFile(join(dir, 'tools.yaml'), yaml(`${join(dir, 'echo.mjs')}:Echo`));
    const [echo] = await loadTools(join(dir, 'tools.yaml'));
    expect(echo.timeoutMs).toBe(2000);
    expect(await echo.tool.execute('i', { text: 'hi' }, {})).toEqual([{ text: 'echo: hi' }, 0, {}]);
    await writeFile(join(dir, 'bad.yaml'), yaml(`${join(dir, 'echo.mjs')}:Nope`));
    await expect(loadTools(join(dir, 'bad.yaml'))).rejects.toThrow(
      /bad\.yaml: tools\[0\]\.class_name: .*exports no class Nope/,
    );
    await writeFile(join(dir, 'python.yaml'), yaml('my_pkg.tools.MyTool'));
    await expect(loadTools(join(dir, 'python.yaml'))).rejects.toThrow(/neither a built-in .* nor a JS module/);
    expect(() =>
      parseToolConfig({ tools: [{ class_name: 'x', tool_schema: { type: 'function', function: {} } }] }, 't.yaml'),
    ).toThrow('t.yaml: tools[0].tool_schema');
    await expect(loadTools(join(dir, 'missing.yaml'))).rejects.toThrow(
      /tool_config_path=.*missing\.yaml: cannot read \(ENOENT\)/,
    );
  });
});

describe('custom tools run in a worker thread', () => {
  it('a tool whose execute loops forever is stopped at its timeout_s and counted as a timeout; the next call gets a ' +
    'fresh worker; a constructor that throws names the entry and the class', { timeout: 60_000 }, async () => {
    const dir = await makeTempDir('tools-');
    await writeFile(
      join(dir, 'loop.mjs'),
      'const looping = new BroadcastChannel("tool-loop");\n' +
        'export class Loop { constructor(config) { this.config = config; } async create() { return "i"; } ' +
        'async execute(id, p) { if (p.loop) { looping.postMessage("looping"); for (;;) {} } ' +
        'return [{ text: "fine" }, 0, {}]; } ' +
        'async calc_reward() { return 0; } async release() {} }\n' +
        'export class Boom { constructor() { throw new Error("ctor boom"); } }\n',
    );
    const yaml = (className: string) =>
      `tools:\n  - class_name: ${join(dir, 'loop.mjs')}:${className}\n    config: {timeout_s: 1}\n    ` +
      'tool_schema:\n      type: function\n      function: {name: loop, parameters: {type: object}}\n';
    await writeFile(join(dir, 'loop.yaml'), yaml('Loop'));
    const [loop] = await loadTools(join(dir, 'loop.yaml'));
    const session = new ToolAgentSession(agentWith([loop]), 7, () => ({}), 1000);
    // The trainer's clock is faked: timeout_s passes when the test moves it, once the tool says it loops, so no call
    // that answers (create, the fresh worker's execute) can miss its second on a loaded machine.
    const looping = new BroadcastChannel('tool-loop');
    const inLoop = new Promise((resolve) => (looping.onmessage = resolve));
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const observed = session.observe(0, [end(0, call('loop', { loop: true }))]);
      await inLoop;
      // The trainer's thread stayed free: its timer ends the call at the tool's timeout_s.
      await vi.advanceTimersByTimeAsync(1000);
      const [looped] = (await observed).map(read);
      expect(looped).toContain('Error when executing tool: loop.execute did not answer within 1 s');
      expect(session.metrics()['tool_call_failures/timeout']).toBe(1);
      expect(await loop.tool.execute('i', {}, {})).toEqual([{ text: 'fine' }, 0, {}]);
    } finally {
      vi.useRealTimers();
      looping.close();
    }

    await writeFile(join(dir, 'boom.yaml'), yaml('Boom'));
    await expect(loadTools(join(dir, 'boom.yaml'))).rejects.toThrow(
      `boom.yaml: tools[0].class_name: ${join(dir, 'loop.mjs')}: the constructor of Boom threw: ctor boom`,
    );
  });
});

describe('search tool', () => {
  it(
    "verl's SearchTool over BM25 (config.corpus_path): verl's result text per query, an error text for a bad " +
      'query_list',
    async () => {
      const dir = await makeTempDir('search-tool-');
      await writeFile(
        join(dir, 'corpus.jsonl'),
        `${[
          { id: '0', contents: '"Zorvak"\nZorvak is teal.' },
          { id: '1', contents: '"Mirel"\nMirel is amber.' },
          { id: '2', contents: '"Quon"\nQuon is grey.' },
        ]
          .map((d) => JSON.stringify(d))
          .join('\n')}\n`,
      );
      await writeFile(
        join(dir, 'tools.yaml'),
        `tools:\n  - class_name: verl.tools.search_tool.SearchTool\n    config: {corpus_path: ` +
          `${join(dir, 'corpus.jsonl')}, topk: 1}\n` +
          '    tool_schema: {type: function, function: {name: search, parameters: {type: object, properties: ' +
          '{query_list: {type: array}}, required: [query_list]}}}\n',
      );
      const [search] = await loadTools(join(dir, 'tools.yaml'));
      const [response] = await search.tool.execute('i', { query_list: ['zorvak', 'mirel'] }, {});
      expect(JSON.parse(response.text!)).toEqual({
        result: 'Doc 1 (Title: "Zorvak")\nZorvak is teal.\n---\nDoc 1 (Title: "Mirel")\nMirel is amber.',
      });
      const [bad] = await search.tool.execute('i', { query_list: 'zorvak' }, {});
      expect(bad.text).toContain("'query_list' is missing, empty, or not a list");
      await writeFile(
        join(dir, 'no-retriever.yaml'),
        'tools:\n  - class_name: verl.tools.search_tool.SearchTool\n    tool_schema: {type: function, function: ' +
          '{name: search}}\n',
      );
      await expect(loadTools(join(dir, 'no-retriever.yaml'))).rejects.toThrow(
        /tools\[0\]\.config: the search tool needs retrieval_service_url .* or corpus_path/,
      );
    },
  );
});

describe('tool agent session', () => {
  it('answers a call with the tool message the template renders, without its default system prompt', async () => {
    const [gsm8k] = await loadTools(GSM8K_TOOLS);
    const session = new ToolAgentSession(
      agentWith([gsm8k]),
      2,
      () => ({ calc_gsm8k_reward: { create_kwargs: { ground_truth: '3' } } }),
      1000,
    );
    const [observation, finished] = await session.observe(0, [
      end(0, `1 + 2 = 3 ${call('calc_gsm8k_reward', { answer: '3' })}<|im_end|>`),
      end(1, '#### 3<|im_end|>'),
    ]);
    expect(read(observation)).toBe(
      "<|im_start|>user\n<tool_response>\nCurrent parsed answer='3' " +
        'reward=1.0\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
    expect(finished).toBeNull();
    expect(appendedMessagesText(template, [{ role: 'tool', content: 'x' }])).not.toContain('system');
    // The prompt shows the model the tools' schemas (the dataset renders it with tools=, as verl's agent loop).
    expect(
      template.render([{ role: 'user', content: 'q' }], { addGenerationPrompt: true, tools: [gsm8k.schema] }),
    ).toContain('<tools>\n{"type": "function", "function": {"name": "calc_gsm8k_reward"');
    const m = session.metrics();
    // verl's num_turns: user turns + assistant turns + 1.
    expect([m['num_turns/min'], m['num_turns/max']]).toEqual([2, 3]);
    expect([m['tool_call_counts/min'], m['tool_call_counts/max'], m['tool_call_counts/mean']]).toEqual([0, 1, 0.5]);
    expect(m['tool_call_failures/error']).toBe(0);
  });

  it(
    'runs the first max_parallel_calls calls together, one tool message each; ends at the budget and the turn ' +
      'limits',
    async () => {
      const echo = scripted('echo', async (_id, p) => [{ text: String(p.text) }, 0, {}]);
      const session = new ToolAgentSession(
        agentWith([echo], { maxParallelCalls: 2, maxAssistantTurns: 2 }),
        3,
        () => ({}),
        1000,
      );
      expect(session.maxTurns).toBe(2);
      const three = `${call('echo', { text: 'a' })}${call('echo', { text: 'b' })}${call('echo', { text: 'c' })}`;
      const [both, cut] = await session.observe(0, [end(0, three), end(1, three, 'length')]);
      expect(read(both)).toBe(
        '<|im_start|>user\n<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
      );
      expect(cut).toBeNull();
      expect(await session.observe(1, [end(0, three)])).toEqual([null]);
      expect(session.metrics()['tool_call_counts/max']).toBe(2);
      // A tool message that leaves no room to answer ends the response (verl: no user turn counted).
      const tight = new ToolAgentSession(agentWith([echo]), 1, () => ({}), 60);
      expect(await tight.observe(0, [end(0, call('echo', { text: 'a' }))])).toEqual([null]);
      expect(tight.metrics()['num_turns/max']).toBe(2);
      const limited = new ToolAgentSession(
        agentWith([echo], { maxUserTurns: 1, maxAssistantTurns: 5 }),
        1,
        () => ({}),
        1000,
      );
      expect(limited.maxTurns).toBe(2);
    },
  );

  it(
    'a tool that throws, hangs or returns no text, and a malformed, unknown or incomplete call: an error ' +
      'observation each, counted',
    async () => {
      const tools = [
        scripted('throws', async () => {
          throw new Error('disk full');
        }),
        scripted('hangs', () => new Promise(() => {}), 50),
        scripted('image', async () => [{ image: 'png' } as never, 0, {}]),
        scripted('number', async () => [42 as never, 0, {}]),
        { ...scripted('needs', async () => [{ text: 'ok' }, 0, {}]), schema: schema('needs', ['answer']) },
      ];
      const session = new ToolAgentSession(agentWith(tools), 7, () => ({}), 1000);
      const turns = [
        call('throws', {}),
        call('hangs', {}),
        call('image', {}),
        call('number', {}),
        '<tool_call>{"name": "throws", "arguments": </tool_call>',
        call('nope', {}),
        call('needs', {}),
      ];
      const observations = (
        await session.observe(
          0,
          turns.map((t, i) => end(i, t)),
        )
      ).map(read);
      expect(observations.every((o) => o!.includes('Error when executing tool: '))).toBe(true);
      expect(observations[0]).toContain('disk full');
      expect(observations[1]).toContain('hangs.execute did not answer within 0.05 s');
      expect(observations[2]).toContain('only text is supported');
      expect(observations[5]).toContain('no tool named "nope"');
      expect(observations[6]).toContain('needs the argument(s) answer');
      const m = session.metrics();
      expect([
        m['tool_call_failures/error'],
        m['tool_call_failures/timeout'],
        m['tool_call_failures/non_text'],
        m['tool_call_failures/malformed'],
      ]).toEqual([1, 1, 2, 3]);
    },
  );

  it('cuts an overlong tool text as verl does, on the side multi_turn.tool_response_truncate_side names', () => {
    expect(truncateToolResponse('abcdefgh', 4, 'left')).toBe('abcd...(truncated)');
    expect(truncateToolResponse('abcdefgh', 4, 'right')).toBe('(truncated)...efgh');
    expect(truncateToolResponse('abcdefgh', 4, 'middle')).toBe('ab...(truncated)...gh');
    expect(truncateToolResponse('abc', 4, 'middle')).toBe('abc');
  });
});
