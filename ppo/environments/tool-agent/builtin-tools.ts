// The tools a tool config names by verl's class path: verl's own tools that exist here. Browser-safe: the search
// tool's retriever is built by the caller (an HTTP server, or BM25 over a corpus it has read).
import type { Retriever } from '../search/retriever.ts';
import type { AgentTool, ToolSchema } from './agent-tool.ts';
import { Gsm8kTool } from './gsm8k-tool.ts';
import { SearchTool } from './search-tool.ts';

export interface BuiltinToolContext {
  /** The search tool's retriever from its config (retrieval_service_url, or corpus_path: ours). */
  retrieverFor(config: Record<string, unknown>, where: string): Promise<Retriever>;
}

type BuiltinFactory = (
  config: Record<string, unknown>,
  schema: ToolSchema,
  context: BuiltinToolContext,
  where: string,
) => Promise<AgentTool>;

export const BUILTIN_TOOLS: Readonly<Record<string, BuiltinFactory>> = {
  'verl.tools.gsm8k_tool.Gsm8kTool': async (config, schema) => new Gsm8kTool(config, schema),
  'verl.tools.search_tool.SearchTool': async (config, schema, context, where) =>
    new SearchTool(config, schema, await context.retrieverFor(config, where)),
};
