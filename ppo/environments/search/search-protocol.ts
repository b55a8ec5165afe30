// The search protocol of a run from its configuration (do_search, max_turns, retriever.*, data.max_obs_length):
// the retriever — Search-R1's retrieval server at retriever.url, else BM25 over a corpus — and how observations
// read (Search-R1's text, or a built-in task's own for its small vocabulary). Browser-safe: the caller loads a
// corpus file.
import type { Tokenizer } from '../../../models/tokenizer.ts';
import type { CorpusDocument, RetrievedDocument, Retriever } from './retriever.ts';
import { HttpRetriever } from './http-retriever.ts';
import { Bm25Retriever } from './bm25-retriever.ts';
import type { SearchProtocol } from './search-turns.ts';

/** What a built-in search task (ppo/tasks/) puts in the search protocol besides the retriever. */
export interface BuiltinSearchFormat {
  formatObservation: (docs: readonly RetrievedDocument[]) => string;
  invalidActionText: string;
}

/** The retriever.* keys, as the config spells them (config.retriever fits). */
export interface RetrieverOptions {
  url: string | null;
  topk: number;
  timeout: number;
  max_retries: number;
}

/** What a search rollout reads of the config: retriever.topk, max_turns, data.max_obs_length (the config fits). */
export interface SearchOptions {
  retriever: Pick<RetrieverOptions, 'topk'>;
  max_turns: number;
  data: { max_obs_length: number };
}

/** retriever.url's server, or BM25 over `corpus` (named `source` in logs and errors). */
export function retrieverFromConfig(
  retriever: RetrieverOptions,
  corpus: { documents: readonly CorpusDocument[]; source: string } | null,
): Retriever {
  const { url, timeout, max_retries } = retriever;
  if (url !== null) return new HttpRetriever({ url, timeoutMs: timeout * 1000, maxRetries: max_retries });
  if (!corpus) throw new Error('do_search=true: no retriever — set retriever.url or retriever.corpus_path');
  return new Bm25Retriever(corpus.documents, { source: corpus.source });
}

export function searchProtocol(
  config: SearchOptions,
  retriever: Retriever,
  tokenizer: Pick<Tokenizer, 'encode' | 'decode'>,
  format: BuiltinSearchFormat | null,
): SearchProtocol {
  return {
    retriever,
    tokenizer,
    topk: config.retriever.topk,
    maxSearchTurns: config.max_turns,
    maxObsLength: config.data.max_obs_length,
    ...(format ?? {}),
  };
}
