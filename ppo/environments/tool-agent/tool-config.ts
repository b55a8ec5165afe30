// verl's tool config file (examples/sglang_multiturn/config/tool_config/*.yaml): `tools:`, a list of
// {class_name, config, tool_schema: {type: function, function: {name, description, parameters}}}. Parsed here from
// the YAML's value, checked entry by entry so a mistake names the file, the entry and the field. Browser-safe.
import type { ToolSchema } from './agent-tool.ts';

export interface ToolEntry {
  /** verl's Python path (verl.tools.gsm8k_tool.Gsm8kTool: a built-in) or a JS module, `path/to/tool.js:ClassName`. */
  className: string;
  config: Record<string, unknown>;
  schema: ToolSchema;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function parseToolConfig(value: unknown, file: string): ToolEntry[] {
  if (!isMapping(value) || !Array.isArray(value.tools))
    throw new Error(`${file}: expected a mapping with a \`tools:\` list (verl's tool config format)`);
  const names = new Set<string>();
  return value.tools.map((entry, i) => {
    const where = `${file}: tools[${i}]`;
    if (!isMapping(entry))
      throw new Error(`${where}: expected {class_name, config, tool_schema}, got ${JSON.stringify(entry)}`);
    if (typeof entry.class_name !== 'string' || entry.class_name === '')
      throw new Error(`${where}.class_name: expected a class path, got ${JSON.stringify(entry.class_name)}`);
    const config = entry.config ?? {};
    if (!isMapping(config)) throw new Error(`${where}.config: expected a mapping, got ${JSON.stringify(config)}`);
    const schema = entry.tool_schema;
    if (
      !isMapping(schema) ||
      schema.type !== 'function' ||
      !isMapping(schema.function) ||
      typeof schema.function.name !== 'string' ||
      schema.function.name === ''
    ) {
      throw new Error(
        `${where}.tool_schema: expected {type: function, function: {name, description, parameters}}, got ` +
          `${JSON.stringify(schema)}`,
      );
    }
    if (schema.function.parameters !== undefined && !isMapping(schema.function.parameters))
      throw new Error(`${where}.tool_schema.function.parameters: expected a JSON schema mapping`);
    const name = schema.function.name;
    if (names.has(name)) throw new Error(`${where}: a second tool named ${name}`);
    names.add(name);
    return { className: entry.class_name, config, schema: schema as unknown as ToolSchema };
  });
}
