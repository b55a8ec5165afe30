// The hermes tool-call format (verl's HermesToolParser, from vLLM's; Qwen2.5/Qwen3 write it): every
// <tool_call>{"name": ..., "arguments": {...}}</tool_call> of a turn's text. verl logs a call whose JSON does not
// parse and drops it; here it stays, as a malformed call, so the model is told (an error observation) instead of the
// response silently ending.

export type ToolCall = { name: string; arguments: Record<string, unknown> } | { malformed: string };

const TOOL_CALL = /<tool_call>(.*?)<\/tool_call>/gs;

function describe(body: string): string {
  return body.trim().length > 80 ? `${body.trim().slice(0, 80)}…` : body.trim();
}

/** The calls of a turn, in order; none when the turn lacks either tag (verl's check). */
export function parseHermesToolCalls(text: string): ToolCall[] {
  if (!text.includes('<tool_call>') || !text.includes('</tool_call>')) return [];
  return [...text.matchAll(TOOL_CALL)].map((match): ToolCall => {
    let call: unknown;
    try {
      call = JSON.parse(match[1]);
    } catch (err) {
      return {
        malformed: `the tool call ${JSON.stringify(describe(match[1]))} is not JSON (${(err as Error).message})`,
      };
    }
    if (call === null || typeof call !== 'object' || Array.isArray(call))
      return { malformed: `the tool call ${JSON.stringify(describe(match[1]))} is not a JSON object` };
    const { name, arguments: args } = call as Record<string, unknown>;
    if (typeof name !== 'string')
      return { malformed: `the tool call ${JSON.stringify(describe(match[1]))} has no "name" string` };
    if (args === null || typeof args !== 'object' || Array.isArray(args))
      return { malformed: `the call of ${name} has no "arguments" object` };
    return { name, arguments: args as Record<string, unknown> };
  });
}
