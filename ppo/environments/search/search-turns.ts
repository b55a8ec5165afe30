// Search-R1's multi-turn protocol (search_r1/llm_agent/generation.py) as the rollout's TurnEnvironment. A turn
// ends at </search>, </answer> or an end token. The first <search>…</search> or <answer>…</answer> of the
// turn is its action: a search sends the query to the retriever (all searches of a turn in one batch) and
// appends the formatted documents as an observation; an answer ends the response; anything else is an invalid
// action and gets a corrective observation. After `maxSearchTurns` turns comes a last one in which nothing is
// executed: the response ends whatever it holds. Observations are cut to maxObsLength tokens.
import type { Tokenizer } from '../../../models/tokenizer.ts';
import type { TurnEnd, TurnEnvironment } from '../../generation/types.ts';
import type { RetrievedDocument, Retriever } from './retriever.ts';
import { formatDocuments } from './format-documents.ts';

/** Search-R1's corrective observation after a turn with neither a search nor an answer. */
export const SEARCH_R1_INVALID_ACTION =
  '\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. ' +
  'If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n';

/** Search-R1's observation: the passages between information tags, blank lines around. */
export function searchR1Observation(docs: readonly RetrievedDocument[]): string {
  return `\n\n<information>${formatDocuments(docs).trim()}</information>\n\n`;
}

export interface SearchProtocol {
  retriever: Retriever;
  /** Documents per search (retriever.topk). */
  topk: number;
  /** Turns whose search is executed (Search-R1's max_turns); one final turn follows. */
  maxSearchTurns: number;
  /** Observation tokens kept (data.max_obs_length). */
  maxObsLength: number;
  tokenizer: Pick<Tokenizer, 'encode' | 'decode'>;
  /** Text inserted after a search; Search-R1's by default. */
  formatObservation?: (docs: readonly RetrievedDocument[]) => string;
  /** Text inserted after an invalid action; Search-R1's by default. */
  invalidActionText?: string;
}

export type SearchAction = { kind: 'search' | 'answer'; content: string } | { kind: 'invalid' };

/** Search-R1's postprocess_predictions: the first complete search or answer tag pair of the turn. */
export function parseAction(turnText: string): SearchAction {
  const match = /<(search|answer)>(.*?)<\/\1>/s.exec(turnText);
  return match ? { kind: match[1] as 'search' | 'answer', content: match[2].trim() } : { kind: 'invalid' };
}

/** Per sample of one rollout. */
interface SampleStats {
  turns: number;
  /** Observations handed back to the rollout (search results or the invalid-action correction). */
  observations: number;
  validActions: number;
  searches: number;
  answered: boolean;
  observationTokens: number;
}

/** A closing tag that is one token of the vocabulary ends a turn on the GPU; a longer one, by its text. */
async function turnEnders(
  tokenizer: Pick<Tokenizer, 'encode'>,
  tags: readonly string[],
): Promise<{ ids: number[]; strings: string[] }> {
  const ids: number[] = [];
  const strings: string[] = [];
  for (const tag of tags) {
    const encoded = await tokenizer.encode(tag, { addSpecialTokens: false });
    if (encoded.length === 1) ids.push(encoded[0]);
    else strings.push(tag);
  }
  return { ids, strings };
}

const CLOSING_TAGS = ['</search>', '</answer>'];

/** One rollout's search session: the environment the rollout calls, and the env/* metrics of its samples. */
export class SearchSession implements TurnEnvironment {
  readonly maxTurns: number;
  private readonly stats: SampleStats[];

  private constructor(
    private readonly protocol: SearchProtocol,
    readonly turnEndTokenIds: readonly number[],
    readonly turnEndStrings: readonly string[],
    samples: number,
  ) {
    this.maxTurns = protocol.maxSearchTurns + 1;
    this.stats = Array.from({ length: samples }, () => ({
      turns: 0,
      observations: 0,
      validActions: 0,
      searches: 0,
      answered: false,
      observationTokens: 0,
    }));
  }

  static async start(protocol: SearchProtocol, samples: number): Promise<SearchSession> {
    const enders = await turnEnders(protocol.tokenizer, CLOSING_TAGS);
    return new SearchSession(protocol, enders.ids, enders.strings, samples);
  }

  async observe(turn: number, ended: readonly TurnEnd[]): Promise<(number[] | null)[]> {
    const { protocol } = this;
    const final = turn + 1 >= this.maxTurns;
    const actions = await Promise.all(
      ended.map(async (end) => parseAction(await protocol.tokenizer.decode(end.tokens, { skipSpecialTokens: false }))),
    );
    const searching = ended.flatMap((_, k) => (!final && actions[k].kind === 'search' ? [k] : []));
    const queries = searching.map((k) => (actions[k] as { content: string }).content);
    const results = queries.length > 0 ? await protocol.retriever.search(queries, protocol.topk) : [];
    const observations: (string | null)[] = ended.map((_, k) => {
      const action = actions[k];
      if (action.kind === 'answer' || final) return null;
      if (action.kind === 'search')
        return (protocol.formatObservation ?? searchR1Observation)(results[searching.indexOf(k)]);
      return protocol.invalidActionText ?? SEARCH_R1_INVALID_ACTION;
    });
    return Promise.all(
      ended.map(async (end, k) => {
        const stats = this.stats[end.sample];
        stats.turns++;
        if (actions[k].kind !== 'invalid') stats.validActions++;
        if (actions[k].kind === 'answer') stats.answered = true;
        const text = observations[k];
        if (text === null) return null;
        stats.observations++;
        if (actions[k].kind === 'search') stats.searches++;
        const ids = (await protocol.tokenizer.encode(text, { addSpecialTokens: false })).slice(
          0,
          protocol.maxObsLength,
        );
        stats.observationTokens += ids.length;
        return ids;
      }),
    );
  }

  /** Search-R1's env/* metrics, plus the share of response tokens that were observations, and verl's
   *  num_turns/* (its agent loop's count: the prompt, each assistant turn and each tool response). */
  metrics(responseTokens: number): Record<string, number> {
    const mean = (f: (s: SampleStats) => number) => this.stats.reduce((sum, s) => sum + f(s), 0) / this.stats.length;
    const turns = this.stats.map((s) => s.turns);
    const conversationTurnsOf = (s: SampleStats) => 1 + s.turns + s.observations;
    const conversationTurns = this.stats.map(conversationTurnsOf);
    return {
      'num_turns/min': Math.min(...conversationTurns),
      'num_turns/max': Math.max(...conversationTurns),
      'num_turns/mean': mean(conversationTurnsOf),
      'env/number_of_actions/mean': mean((s) => s.turns),
      'env/number_of_actions/max': Math.max(...turns),
      'env/number_of_actions/min': Math.min(...turns),
      'env/number_of_valid_action': mean((s) => s.validActions),
      'env/ratio_of_valid_action': mean((s) => (s.turns ? s.validActions / s.turns : 0)),
      'env/number_of_valid_search': mean((s) => s.searches),
      'env/finish_ratio': mean((s) => (s.answered ? 1 : 0)),
      'env/observation_token_share': responseTokens
        ? this.stats.reduce((sum, s) => sum + s.observationTokens, 0) / responseTokens
        : 0,
    };
  }
}
