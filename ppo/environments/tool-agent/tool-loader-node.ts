// Loads multi_turn.tool_config_path: verl's YAML, each entry's class a built-in (by verl's class path) or a JS
// module of the user's, `path/to/tool.js:ClassName` (the path from the working directory, as verl imports
// class_name from its own; `:ClassName` omitted, the module's default export), built and run in a worker thread of
// its own (tool-thread-node.ts), so a tool that loops cannot hang the run.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { HttpRetriever } from '../search/http-retriever.ts';
import { Bm25Retriever } from '../search/bm25-retriever.ts';
import { loadCorpus } from '../search/corpus-node.ts';
import type { Retriever } from '../search/retriever.ts';
import { DEFAULT_TOOL_TIMEOUT_S, type AgentTool, type LoadedTool } from './agent-tool.ts';
import { startToolThread } from './tool-thread-node.ts';
import { parseToolConfig, type ToolEntry } from './tool-config.ts';
import { BUILTIN_TOOLS, type BuiltinToolContext } from './builtin-tools.ts';

async function retrieverFor(config: Record<string, unknown>, where: string): Promise<Retriever> {
  const url = config.retrieval_service_url;
  const timeout = typeof config.timeout === 'number' ? config.timeout : DEFAULT_TOOL_TIMEOUT_S;
  if (typeof url === 'string' && url !== '') return new HttpRetriever({ url, timeoutMs: timeout * 1000 });
  const corpus = config.corpus_path;
  if (typeof corpus === 'string' && corpus !== '')
    return new Bm25Retriever(await loadCorpus(corpus), { source: corpus });
  throw new Error(
    `${where}.config: the search tool needs retrieval_service_url (a Search-R1 retrieval server) or corpus_path (a ` +
      `JSONL corpus for BM25)`,
  );
}

const CONTEXT: BuiltinToolContext = { retrieverFor };

/** A tool of the user's, `path/to/tool.js:ClassName`, built in its own worker thread (tool-thread-node.ts). */
async function customTool(entry: ToolEntry, where: string, timeoutMs: number): Promise<AgentTool> {
  const colon = entry.className.lastIndexOf(':');
  const [file, exported] =
    colon > 1 ? [entry.className.slice(0, colon), entry.className.slice(colon + 1)] : [entry.className, 'default'];
  if (!/\.(m?js|ts)$/.test(file)) {
    throw new Error(
      `${where}.class_name: ${entry.className} is neither a built-in (${Object.keys(BUILTIN_TOOLS).join(', ')}) nor ` +
        `a JS module path/to/tool.js:ClassName`,
    );
  }
  const data = { url: pathToFileURL(resolve(file)).href, exported, config: entry.config, schema: entry.schema };
  try {
    return await startToolThread(data, entry.schema.function.name, timeoutMs);
  } catch (err) {
    throw new Error(`${where}.class_name: ${file}: ${(err as Error).message}`);
  }
}

export async function loadTools(path: string): Promise<LoadedTool[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new Error(
      `actor_rollout_ref.rollout.multi_turn.tool_config_path=${path}: cannot read ` +
        `(${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    throw new Error(`${path}: not valid YAML: ${(err as Error).message}`);
  }
  const entries = parseToolConfig(value, path);
  return Promise.all(
    entries.map(async (entry, i) => {
      const where = `${path}: tools[${i}]`;
      const timeout = entry.config.timeout_s ?? DEFAULT_TOOL_TIMEOUT_S;
      if (typeof timeout !== 'number' || !(timeout > 0))
        throw new Error(`${where}.config.timeout_s: expected seconds > 0, got ${JSON.stringify(timeout)}`);
      const builtin = BUILTIN_TOOLS[entry.className];
      const tool = builtin
        ? await builtin(entry.config, entry.schema, CONTEXT, where)
        : await customTool(entry, where, timeout * 1000);
      return { name: entry.schema.function.name, schema: entry.schema, tool, timeoutMs: timeout * 1000 };
    }),
  );
}
