// An in-process BM25 retriever over a corpus held in memory, for Search-R1-style rollouts without a retrieval server
// (small corpora: tens of thousands to a few hundred thousand passages). Scoring is Lucene's BM25Similarity as Pyserini
// runs it, with Pyserini's defaults k1=0.9, b=0.4:
//   score(q, d) = Σ_t w_t · idf_t · tf_td / (tf_td + k1·(1 − b + b·|d|/avgdl)), idf_t = ln(1 + (N − df_t + 0.5)/(df_t +
//   0.5)) where w_t is how often t occurs in the query (Anserini's bag-of-words query boosts a repeated term by its
//   count) and avgdl is the mean document length in tokens. Like Lucene ≥ 8 there is no (k1 + 1) factor (it scales
//   every score alike); unlike Lucene, document lengths are exact rather than rounded to one byte, so scores of long
//   documents differ from Pyserini's in the third digit. Analyzer: lower-case, then tokens are maximal runs of Unicode
//   letters, numbers and combining marks (marks keep decomposed accents and Indic vowel signs inside their word). No
//   stemming and no stopword list, unlike Pyserini's default English analyzer: "running" does not match "run", and
//   "the" counts like any other term (its low idf keeps it from mattering). Only documents containing at least one
//   query term are returned, so a query gets fewer than topk documents (none when no term occurs in the corpus), as
//   Lucene does; Search-R1's dense retriever always returns topk. Equal scores rank by corpus order.
import { checkTopk, type CorpusDocument, type Retriever, type RetrievedDocument } from './retriever.ts';

export interface Bm25Options {
  /** Names the corpus in `description`, e.g. its file name. */
  source?: string;
  k1?: number;
  b?: number;
}

const TOKEN = /[\p{L}\p{N}\p{M}]+/gu;

function bm25Tokens(text: string): string[] {
  return text.toLowerCase().match(TOKEN) ?? [];
}

export class Bm25Retriever implements Retriever {
  readonly description: string;
  private readonly corpus: readonly CorpusDocument[];
  private readonly termIds = new Map<string, number>();
  private readonly idf: Float64Array;
  /** Postings of term t: docIds/termFreqs[postingStart[t] .. postingStart[t + 1]), docs ascending. */
  private readonly postingStart: Uint32Array;
  private readonly postingDocs: Uint32Array;
  private readonly postingFreqs: Uint32Array;
  /** k1·(1 − b + b·|d|/avgdl) per document: the part of the denominator that does not depend on the term. */
  private readonly lengthNorm: Float64Array;
  /** Per-query accumulator, reused: zero outside a search. */
  private readonly scores: Float64Array;

  constructor(corpus: readonly CorpusDocument[], { source = 'in-memory corpus', k1 = 0.9, b = 0.4 }: Bm25Options = {}) {
    if (corpus.length === 0) throw new Error(`bm25 (${source}): the corpus is empty`);
    if (!(k1 >= 0)) throw new Error(`bm25 (${source}): k1 must be non-negative, got ${k1}`);
    if (!(b >= 0 && b <= 1)) throw new Error(`bm25 (${source}): b must be in [0, 1], got ${b}`);
    const n = corpus.length;
    this.corpus = corpus;
    this.description = `bm25 (${source}, ${n} docs)`;

    // Pass 1: every token of every document as a term id, documents back to back.
    let tokens = new Uint32Array(1 << 16);
    let tokenCount = 0;
    const docStart = new Uint32Array(n + 1);
    for (let d = 0; d < n; d++) {
      for (const token of bm25Tokens(corpus[d].contents)) {
        let id = this.termIds.get(token);
        if (id === undefined) {
          id = this.termIds.size;
          this.termIds.set(token, id);
        }
        if (tokenCount === tokens.length) {
          const grown = new Uint32Array(tokens.length * 2);
          grown.set(tokens);
          tokens = grown;
        }
        tokens[tokenCount++] = id;
      }
      docStart[d + 1] = tokenCount;
    }
    const termCount = this.termIds.size;

    // Pass 2: document frequencies, hence where each term's postings start.
    const lastDoc = new Int32Array(termCount).fill(-1);
    const df = new Uint32Array(termCount);
    for (let d = 0; d < n; d++) {
      for (let i = docStart[d]; i < docStart[d + 1]; i++) {
        const t = tokens[i];
        if (lastDoc[t] !== d) {
          lastDoc[t] = d;
          df[t]++;
        }
      }
    }
    this.postingStart = new Uint32Array(termCount + 1);
    this.idf = new Float64Array(termCount);
    for (let t = 0; t < termCount; t++) {
      this.postingStart[t + 1] = this.postingStart[t] + df[t];
      this.idf[t] = Math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5));
    }

    // Pass 3: postings in document order; a term's first occurrence in a document claims its slot, later ones count.
    const postingCount = this.postingStart[termCount];
    this.postingDocs = new Uint32Array(postingCount);
    this.postingFreqs = new Uint32Array(postingCount);
    const next = this.postingStart.slice(0, termCount);
    const slot = new Uint32Array(termCount);
    lastDoc.fill(-1);
    for (let d = 0; d < n; d++) {
      for (let i = docStart[d]; i < docStart[d + 1]; i++) {
        const t = tokens[i];
        if (lastDoc[t] !== d) {
          lastDoc[t] = d;
          slot[t] = next[t]++;
          this.postingDocs[slot[t]] = d;
        }
        this.postingFreqs[slot[t]]++;
      }
    }

    const avgdl = tokenCount / n;
    this.lengthNorm = new Float64Array(n);
    for (let d = 0; d < n; d++) {
      // An all-empty corpus has avgdl 0; its documents match nothing, so any finite norm will do.
      this.lengthNorm[d] = k1 * (1 - b + (avgdl > 0 ? (b * (docStart[d + 1] - docStart[d])) / avgdl : 0));
    }
    this.scores = new Float64Array(n);
  }

  async search(queries: readonly string[], topk: number): Promise<RetrievedDocument[][]> {
    checkTopk(topk, this.description);
    return queries.map((query) => this.searchOne(query, topk));
  }

  private searchOne(query: string, topk: number): RetrievedDocument[] {
    const queryTermCounts = new Map<number, number>();
    for (const token of bm25Tokens(query)) {
      const t = this.termIds.get(token);
      if (t !== undefined) queryTermCounts.set(t, (queryTermCounts.get(t) ?? 0) + 1);
    }
    const scores = this.scores;
    const matched: number[] = [];
    for (const [t, weight] of queryTermCounts) {
      const termWeight = weight * this.idf[t];
      for (let p = this.postingStart[t]; p < this.postingStart[t + 1]; p++) {
        const d = this.postingDocs[p];
        const tf = this.postingFreqs[p];
        if (scores[d] === 0) matched.push(d);
        scores[d] += (termWeight * tf) / (tf + this.lengthNorm[d]);
      }
    }
    // Best topk kept sorted by (score desc, doc asc); most candidates fail the first comparison with the worst kept.
    const best: number[] = [];
    for (const d of matched) {
      if (best.length === topk && !this.ranksBefore(d, best[topk - 1])) continue;
      let i = best.length === topk ? topk - 1 : best.length;
      while (i > 0 && this.ranksBefore(d, best[i - 1])) {
        best[i] = best[i - 1];
        i--;
      }
      best[i] = d;
    }
    const hits = best.map((d) => ({ id: this.corpus[d].id, contents: this.corpus[d].contents, score: scores[d] }));
    for (const d of matched) scores[d] = 0;
    return hits;
  }

  private ranksBefore(d: number, other: number): boolean {
    return this.scores[d] > this.scores[other] || (this.scores[d] === this.scores[other] && d < other);
  }
}
