// Search-R1's turn protocol as the rollout's environment: actions parsed as Search-R1 parses them, every search
// of a turn in one retriever call, observations formatted and cut to max_obs_length, the corrective observation
// after an invalid action, nothing executed in the last turn, and the env/* metrics.
import { describe, it, expect } from 'vitest';
import { JsTokenizer } from '../../models/tokenizer.ts';
import { syntheticQaTokenizerFiles } from '../../ppo/tasks/synthetic-qa.ts';
import {
  SearchSession,
  parseAction,
  searchR1Observation,
  type SearchProtocol,
} from '../../ppo/environments/search/search-turns.ts';
import type { RetrievedDocument, Retriever } from '../../ppo/environments/search/retriever.ts';
import { runTrainerIo } from '../../ppo/jobs/builtin-run.ts';
import { PromptSampler } from '../../ppo/data/dataset.ts';

const { tokenizerJson, tokenizerConfig } = syntheticQaTokenizerFiles();
const tokenizer = JsTokenizer.fromJson(tokenizerJson, tokenizerConfig);

class RecordingRetriever implements Retriever {
  readonly description = 'recording';
  readonly calls: { queries: string[]; topk: number }[] = [];
  async search(queries: readonly string[], topk: number): Promise<RetrievedDocument[][]> {
    this.calls.push({ queries: [...queries], topk });
    return queries.map((q) => [{ id: q, contents: `${q}\n${q} teal mi bel city lima`, score: 1 }]);
  }
}

function protocol(retriever: Retriever, maxObsLength = 16): SearchProtocol {
  return {
    retriever,
    topk: 2,
    maxSearchTurns: 2,
    maxObsLength,
    tokenizer,
    formatObservation: (docs) =>
      `<information>${docs.map((d) => ` ${d.contents.split('\n')[1]}`).join('')}</information>`,
    invalidActionText: '<information></information>',
  };
}

const ids = async (text: string) => tokenizer.encode(text, { addSpecialTokens: false });

describe('Search-R1 turns', () => {
  it('parses the first complete search or answer of a turn, as Search-R1', () => {
    expect(parseAction('think <search> zor vak color </search>')).toEqual({ kind: 'search', content: 'zor vak color' });
    expect(parseAction('<answer>\nteal</answer><search>x</search>')).toEqual({ kind: 'answer', content: 'teal' });
    expect(parseAction('<search> zor vak color</answer>')).toEqual({ kind: 'invalid' });
    expect(parseAction('teal')).toEqual({ kind: 'invalid' });
    expect(searchR1Observation([{ id: '1', contents: 'T\nbody', score: null }])).toBe(
      '\n\n<information>Doc 1(Title: T) body</information>\n\n',
    );
  });

  it(
    "batches a turn's searches, answers end a sample, invalid turns get the corrective text, the last turn executes " +
      'nothing',
    async () => {
      const retriever = new RecordingRetriever();
      const session = await SearchSession.start(protocol(retriever, 5), 4);
      expect(session.maxTurns).toBe(3);
      // The closing tags are single tokens of this vocabulary: the GPU ends turns on them.
      expect(session.turnEndTokenIds).toEqual([...(await ids('</search>')), ...(await ids('</answer>'))]);
      expect(session.turnEndStrings).toEqual([]);
      const end = async (sample: number, text: string) => ({
        sample,
        tokens: await ids(text),
        reason: 'stop' as const,
        responseLength: 4,
      });
      const first = await session.observe(0, [
        await end(0, '<search> zor vak color</search>'),
        await end(1, '<answer> teal</answer>'),
        await end(2, '<search> mi bel city</search>'),
        await end(3, ' teal teal'),
      ]);
      expect(retriever.calls).toEqual([{ queries: ['zor vak color', 'mi bel city'], topk: 2 }]);
      // cut to max_obs_length = 5 tokens
      expect(first[0]).toEqual(
        (await ids('<information> zor vak color teal mi bel city lima</information>')).slice(0, 5),
      );
      expect(first[1]).toBeNull();
      expect(first[3]).toEqual(await ids('<information></information>'));
      const second = await session.observe(1, [
        await end(0, '<answer> teal</answer>'),
        await end(2, '<search> mi bel city</search>'),
        await end(3, '<search> fen bel color</search>'),
      ]);
      expect(second[0]).toBeNull();
      expect(retriever.calls).toHaveLength(2);
      const last = await session.observe(2, [
        await end(2, '<search> mi bel city</search>'),
        await end(3, '<answer> red</answer>'),
      ]);
      expect(last).toEqual([null, null]);
      expect(retriever.calls).toHaveLength(2);
      const metrics = session.metrics(40);
      expect(metrics['env/number_of_actions/mean']).toBe((2 + 1 + 3 + 3) / 4);
      expect(metrics['env/number_of_actions/max']).toBe(3);
      expect(metrics['env/number_of_valid_search']).toBe((1 + 0 + 2 + 1) / 4);
      expect(metrics['env/finish_ratio']).toBe(3 / 4);
      expect(metrics['env/ratio_of_valid_action']).toBeCloseTo((1 + 1 + 1 + 2 / 3) / 4, 12);
      expect(metrics['env/observation_token_share']).toBe((5 + 5 + 5 + 2 + 5) / 40);
      // verl's num_turns: 1 (the prompt) + assistant turns + observations: samples 0-3 had 2+1, 1+0, 3+2, 3+2.
      expect(metrics['num_turns/min']).toBe(2);
      expect(metrics['num_turns/max']).toBe(6);
      expect(metrics['num_turns/mean']).toBe((4 + 2 + 6 + 6) / 4);
    },
  );

  it('ends turns on closing tags by text when they are several tokens', async () => {
    const charTokenizer = {
      encode: async (text: string) => Array.from(text, (c) => c.charCodeAt(0)),
      decode: async (t: readonly number[]) => String.fromCharCode(...t),
    };
    const session = await SearchSession.start({ ...protocol(new RecordingRetriever()), tokenizer: charTokenizer }, 1);
    expect(session.turnEndTokenIds).toEqual([]);
    expect(session.turnEndStrings).toEqual(['</search>', '</answer>']);
  });

  it('the reward of a search run reads the tags the policy wrote, even when they are special tokens', async () => {
    const text = '<search> zor vak color</search><answer> teal</answer>';
    const sampler = PromptSampler.fromConfig(1, { train_batch_size: 1, shuffle: false, seed: 1 } as never);
    const io = (search: SearchProtocol | null) =>
      runTrainerIo(
        {
          tokenizer,
          train: [],
          val: [],
          actor: { config: { eosTokenIds: [2], padTokenId: 0 } } as never,
          reward: () => 0,
          search,
        },
        sampler,
      ).io;
    expect(await io(protocol(new RecordingRetriever())).decode(await ids(text))).toBe(text);
    expect(await io(null).decode(await ids(text))).toBe(' zor vak color teal');
  });
});
