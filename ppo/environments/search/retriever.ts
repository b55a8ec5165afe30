// What a Search-R1-style multi-turn rollout asks when the policy writes <search>query</search>: a batch of queries
// in, one ranked list of passages per query out. Implementations: HttpRetriever (Search-R1's retrieval server),
// Bm25Retriever (an in-process index over a small corpus).

/** One passage of a corpus; as in Search-R1's wiki dump, the first line of contents is the title. */
export interface CorpusDocument {
  id: string;
  contents: string;
}

/** score is null when the retriever did not report one. */
export interface RetrievedDocument extends CorpusDocument {
  score: number | null;
}

export interface Retriever {
  /** One list of up to topk documents per query, best first; batched: one call per rollout turn. */
  search(queries: readonly string[], topk: number): Promise<RetrievedDocument[][]>;
  /**
   * Human-readable name for errors and logs, e.g. "http://127.0.0.1:8000/retrieve" or "bm25 (corpus.jsonl, 1200 docs)".
   */
  readonly description: string;
}

/** Both retrievers take topk from the rollout config; `where` names the retriever. */
export function checkTopk(topk: number, where: string): void {
  if (!Number.isInteger(topk) || topk < 1) throw new Error(`${where}: topk must be a positive integer, got ${topk}`);
}
