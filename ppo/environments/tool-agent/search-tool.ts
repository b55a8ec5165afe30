// verl's SearchTool (verl/tools/search_tool.py) over this engine's retrievers (ppo/environments/search/): the model
// passes {"query_list": [...]}, the retriever answers each query with topk passages, and the tool returns verl's text —
// JSON {"result": ...} holding, per query, the passages as "Doc i (Title: t)\ntext" joined by "\n---\n".
import type { RetrievedDocument, Retriever } from '../search/retriever.ts';
import { newInstanceId, type AgentTool, type ToolResponse, type ToolSchema } from './agent-tool.ts';

/** verl's _passages2string. */
function passagesText(docs: readonly RetrievedDocument[]): string {
  return docs
    .map((doc, i) => {
      const [title, ...text] = doc.contents.split('\n');
      return `Doc ${i + 1} (Title: ${title})\n${text.join('\n')}\n\n`;
    })
    .join('')
    .trim();
}

export class SearchTool implements AgentTool {
  private readonly topk: number;

  /**
   * `config.topk` as verl's (default 3); the retriever comes from config.retrieval_service_url or config.corpus_path.
   */
  constructor(
    readonly config: Record<string, unknown>,
    readonly toolSchema: ToolSchema,
    private readonly retriever: Retriever,
  ) {
    const topk = config.topk ?? 3;
    if (typeof topk !== 'number' || !Number.isInteger(topk) || topk < 1)
      throw new Error(`SearchTool: config.topk must be a positive integer, got ${JSON.stringify(topk)}`);
    this.topk = topk;
  }

  async create(instanceId: string | null): Promise<[string, ToolResponse]> {
    return [instanceId ?? newInstanceId(), {}];
  }

  async execute(
    _instanceId: string,
    parameters: Record<string, unknown>,
  ): Promise<[ToolResponse, number, Record<string, unknown>]> {
    const queries = parameters.query_list;
    if (!Array.isArray(queries) || queries.length === 0 || !queries.every((q) => typeof q === 'string')) {
      return [
        { text: JSON.stringify({ result: "Error: 'query_list' is missing, empty, or not a list in parameters." }) },
        0,
        {},
      ];
    }
    const results = await this.retriever.search(queries as string[], this.topk);
    const text = results.map(passagesText).join('\n---\n');
    return [
      { text: JSON.stringify({ result: text === '' ? 'No search results found.' : text }) },
      0,
      { total_results: results.length },
    ];
  }

  async calc_reward(): Promise<number> {
    return 0;
  }

  async release(): Promise<void> {}
}
