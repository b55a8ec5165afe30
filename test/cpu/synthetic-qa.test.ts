import { describe, it, expect } from 'vitest';
import { JsTokenizer, type Tokenizer } from '../../models/tokenizer.ts';
import { NativeTokenizer } from '../../models/tokenizer-node.ts';
import { ChatTemplate } from '../../models/chat-template.ts';
import { buildRlDataset, type RlExample } from '../../ppo/data/dataset.ts';
import { computeScore } from '../../ppo/rewards/index.ts';
import { Bm25Retriever } from '../../ppo/environments/search/bm25-retriever.ts';
import {
  SYNTHETIC_QA_ATTRIBUTES,
  SYNTHETIC_QA_DATA_SOURCE,
  SYNTHETIC_QA_ENTITIES,
  corpusJsonl,
  formatDocuments,
  formatObservation,
  guessDemonstration,
  searchDemonstration,
  syntheticQaDataset,
  syntheticQaFact,
  syntheticQaFacts,
  syntheticQaSearchQuery,
  syntheticQaTokenizer,
  syntheticQaTokenizerFiles,
  type Demonstration,
} from '../../ppo/tasks/synthetic-qa.ts';

const VAL_SIZE = 128;
/** Search-R1's default number of retrieved documents; the budget below holds for it. */
const TOPK = 3;
/** Whole sequence (prompt + search turn + observation + answer) the tiny model trains on. */
const SEQUENCE_BUDGET = 48;

const { train, val, corpus } = syntheticQaDataset({ seed: 7, valSize: VAL_SIZE });
const { tokenizerJson, tokenizerConfig } = syntheticQaTokenizerFiles();
const backends: [string, Tokenizer][] = [
  ['native', NativeTokenizer.fromJson(JSON.stringify(tokenizerJson), tokenizerConfig)],
  ['js', JsTokenizer.fromJson(tokenizerJson, tokenizerConfig)],
];
const template = new ChatTemplate(tokenizerConfig, backends[1][1].special);
const datasetOptions = {
  prompt_key: 'prompt',
  reward_fn_key: 'data_source',
  max_prompt_length: 16,
  filter_overlong_prompts: false,
  truncation: 'error' as const,
  template,
};
const trainExamples = (await buildRlDataset(train, { ...datasetOptions, tokenizer: backends[1][1] })).examples;
const valExamples = (await buildRlDataset(val, { ...datasetOptions, tokenizer: backends[1][1] })).examples;
const examples = [...trainExamples, ...valExamples];

const retriever = new Bm25Retriever(corpus);
const retrieved = await retriever.search(
  examples.map((e) => syntheticQaSearchQuery(syntheticQaFact(e))),
  TOPK,
);
const searchDemos = examples.map((e, i) => searchDemonstration(e, formatObservation(formatDocuments(retrieved[i]))));
const longestPrompt = Math.max(...examples.map((e) => e.promptIds.length));
const longestSearch = Math.max(...searchDemos.map((d) => d.ids.length));

const factKey = (e: RlExample) => `${e.extraInfo.entity} ${e.extraInfo.attribute}`;
const answer = (e: RlExample) => (e.groundTruth as { target: string[] }).target[0];

describe('synthetic QA task', () => {
  it('the same seed gives the same dataset and corpus; another seed other values and another split', () => {
    expect(syntheticQaDataset({ seed: 7, valSize: VAL_SIZE })).toEqual({ train, val, corpus });
    const other = syntheticQaDataset({ seed: 8, valSize: VAL_SIZE });
    expect(other.corpus).not.toEqual(corpus);
    expect(other.val.map((r) => r.row.extra_info)).not.toEqual(val.map((r) => r.row.extra_info));
    expect(syntheticQaFacts(7).map((f) => `${f.entity}\n${f.entity} ${f.attribute} ${f.value}`)).toEqual(
      corpus.map((d) => d.contents),
    );
  });

  it(
    'verl-schema rows: every fact asked once, validation facts never in training, their entities and answers still ' +
      'are',
    () => {
      const facts = SYNTHETIC_QA_ENTITIES.length * Object.keys(SYNTHETIC_QA_ATTRIBUTES).length;
      expect(SYNTHETIC_QA_ENTITIES.length).toBe(256);
      expect(trainExamples.length + valExamples.length).toBe(facts);
      expect(corpus.length).toBe(facts);
      expect(valExamples.length).toBe(VAL_SIZE);
      const trainFacts = new Set(trainExamples.map(factKey));
      expect(trainFacts.size).toBe(trainExamples.length);
      const trainEntities = new Set(trainExamples.map((e) => e.extraInfo.entity));
      const trainAnswers = new Set(trainExamples.map((e) => `${e.extraInfo.attribute} ${answer(e)}`));
      for (const e of valExamples) {
        expect(trainFacts.has(factKey(e))).toBe(false);
        expect(trainEntities.has(e.extraInfo.entity)).toBe(true);
        expect(trainAnswers.has(`${e.extraInfo.attribute} ${answer(e)}`)).toBe(true);
      }
      expect(train[0].row).toMatchObject({
        data_source: SYNTHETIC_QA_DATA_SOURCE,
        ability: 'fact-reasoning',
        extra_info: { split: 'train', index: 0 },
      });
      expect(val[0].row).toMatchObject({ extra_info: { split: 'test', index: 0 } });
      expect(() => syntheticQaDataset({ seed: 7, valSize: 257 })).toThrow(/valSize must be an integer in \[0, 256\]/);
    },
  );

  it('the answer is in the corpus and never in the prompt', () => {
    const sentences = new Set(corpus.map((d) => d.contents.split('\n')[1]));
    for (const e of examples) {
      const value = answer(e);
      expect(sentences.has(`${e.extraInfo.entity} ${e.extraInfo.attribute} ${value}`)).toBe(true);
      expect(e.promptIds).not.toContain(syntheticQaTokenizer.tokenId(` ${value}`));
    }
    expect(examples[0].promptText).toBe(
      `<|user|> ${examples[0].extraInfo.attribute} of ${examples[0].extraInfo.entity}<|assistant|>`,
    );
  });

  it('BM25 ranks the asked fact first for every demonstration query', () => {
    const misses = examples.filter((e, i) => retrieved[i][0].contents.split('\n')[1] !== `${factKey(e)} ${answer(e)}`);
    expect(misses.map((e) => e.where)).toEqual([]);
  });

  it(
    `sequences fit the budget: prompt ${longestPrompt} + search demonstration ${longestSearch} (topk ${TOPK}) <= ` +
      `${SEQUENCE_BUDGET} tokens`,
    () => {
      expect(longestPrompt).toBe(6);
      expect(longestPrompt + longestSearch).toBeLessThanOrEqual(SEQUENCE_BUDGET);
    },
  );

  it('documents show as their fact sentences inside the information tags', () => {
    const docs = [
      { id: '0', contents: 'zor vak\nzor vak color teal' },
      { id: '1', contents: 'mi bel\nmi bel  city\tlima' },
    ];
    expect(formatObservation(formatDocuments(docs))).toBe(
      '<information> zor vak color teal mi bel city lima</information>',
    );
    expect(formatDocuments([{ id: '2', contents: 'no title line' }])).toBe(' no title line');
    expect(corpusJsonl(docs)).toBe(
      '{"id":"0","contents":"zor vak\\nzor vak color teal"}\n{"id":"1","contents":"mi bel\\nmi bel  city\\tlima"}\n',
    );
  });

  it('search demonstration: search turn and answer generated, observation not; the reward scores it 1', () => {
    const e = trainExamples[0];
    const demo = searchDemos[0];
    const query = syntheticQaSearchQuery(syntheticQaFact(e));
    const observation = formatObservation(formatDocuments(retrieved[0]));
    expect(demo.segments.map((s) => [s.text, s.generated])).toEqual([
      [`<search> ${query}</search>`, true],
      [observation, false],
      [`<answer> ${answer(e)}</answer></s>`, true],
    ]);
    expect(demo.segments.map((s) => s.ids.length)).toEqual([5, 2 + 4 * TOPK, 4]);
    expect(demo.generatedMask).toEqual([1, 1, 1, 1, 1, ...new Array(2 + 4 * TOPK).fill(0), 1, 1, 1, 1]);
    expectConsistent(demo);
    expect(computeScore(SYNTHETIC_QA_DATA_SOURCE, syntheticQaTokenizer.decode(demo.ids), e.groundTruth)).toBe(1);
  });

  it("a foreign retriever's words outside the vocabulary become the unknown token in the observation", () => {
    const foreign = [{ id: 'w1', contents: 'Zor Vak (painter)\nzor vak color mauve, since 1901' }];
    const demo = searchDemonstration(trainExamples[0], formatObservation(formatDocuments(foreign)));
    const unk = syntheticQaTokenizer.unkToken;
    expect(demo.segments[1].ids.map((id) => syntheticQaTokenizer.tokens[id])).toEqual([
      '<information>',
      ' zor',
      ' vak',
      ' color',
      unk,
      unk,
      unk,
      '</information>',
    ]);
  });

  it("no-search demonstration: the attribute's most common value whoever is asked, all generated", () => {
    for (const e of trainExamples.slice(0, 50)) {
      const demo = guessDemonstration(e);
      const guess = /^<answer> (\S+)<\/answer><\/s>$/.exec(demo.segments[0].text)![1];
      expect(guess).toBe(SYNTHETIC_QA_ATTRIBUTES[syntheticQaFact(e).attribute][0]);
      expect(demo.generatedMask).toEqual([1, 1, 1, 1]);
      expectConsistent(demo);
      expect(computeScore(SYNTHETIC_QA_DATA_SOURCE, syntheticQaTokenizer.decode(demo.ids), e.groundTruth)).toBe(
        guess === answer(e) ? 1 : 0,
      );
    }
  });

  it('a row that is not a synthetic QA fact is an error naming it', () => {
    const e = trainExamples[0];
    expect(() => syntheticQaFact({ ...e, extraInfo: { ...e.extraInfo, entity: 'paris' } })).toThrow(
      /built-in synthetic_qa train row 0: extra_info.entity must be one of the synthetic_qa entities, got "paris"/,
    );
    expect(() => syntheticQaFact({ ...e, extraInfo: { ...e.extraInfo, attribute: 'size' } })).toThrow(
      /extra_info.attribute must be one of color, city, animal/,
    );
    expect(() => syntheticQaFact({ ...e, groundTruth: 'teal' })).toThrow(
      /ground_truth must be \{target: \[one \w+ value\]\}/,
    );
  });
});

describe.each(backends)('synthetic QA tokenizer through the %s backend', (_, backend) => {
  it(
    `gives the class's ids for every prompt and demonstration, and decodes them back (vocabulary ` +
      `${syntheticQaTokenizer.vocabSize})`,
    async () => {
      expect(backend.vocabSize).toBe(syntheticQaTokenizer.vocabSize);
      for (const e of examples)
        expect(await backend.encode(e.promptText)).toEqual(syntheticQaTokenizer.encode(e.promptText));
      for (const demo of searchDemos.slice(0, 100)) {
        const text = demo.segments.map((s) => s.text).join('');
        expect(await backend.encode(text)).toEqual(demo.ids);
        expect(await backend.decode(demo.ids)).toBe(text);
      }
    },
  );
});

/** Segment ids concatenated are the tokens of the whole text, and one mask entry per token. */
function expectConsistent(demo: Demonstration): void {
  expect(demo.ids).toEqual(syntheticQaTokenizer.encode(demo.segments.map((s) => s.text).join('')));
  expect(demo.generatedMask.length).toBe(demo.ids.length);
}
