// The built-in search task: questions about invented entities ("color of zor vak") whose answers exist only in a
// generated corpus with one short fact per document ("zor vak\nzor vak color teal", title on the first line as in
// Search-R1's wiki dump), so a model cannot answer without <search>. Every entity has a value for every attribute,
// drawn with the seed from a small shared set, so each answer is a single word seen in training; validation asks facts
// that training never asks (at most one per entity, and only values some training question also has), so memorised
// answers do not help there. Sequences stay short for a tiny model: a word-level vocabulary, a 6-token prompt, and
// documents shown as their bare fact sentence. A name is two words ("zor vak") of 16 each rather than one of 256: a
// tiny model learns to copy a name into its query within a short warm start only when each word is common in training
// (with one-word names it had not after 300 steps, with two-word names it had). The task comes as a user would bring
// it: verl-schema rows (data_source "synthetic_qa", Search-R1's {target: [answers]} ground truth), a Hugging Face
// tokenizer with a chat template, and a {id, contents} corpus for a retriever. Browser-safe.
import { WordTokenizer } from '../../models/word-tokenizer.ts';
import { builtinTokenizerFiles } from '../../models/word-level-tokenizer.ts';
import { Rng } from '../../engine/rng.ts';
import type { RlExample, RlRecord } from '../data/dataset.ts';
import type { CorpusDocument } from '../environments/search/retriever.ts';

export const SYNTHETIC_QA_DATA_SOURCE = 'synthetic_qa';

export const SEARCH_SPECIAL_TOKENS = [
  '<pad>',
  '<s>',
  '</s>',
  '<|user|>',
  '<|assistant|>',
  '<search>',
  '</search>',
  '<information>',
  '</information>',
  '<answer>',
  '</answer>',
] as const;

const FIRST_SYLLABLES = [
  'zor',
  'mi',
  'ka',
  'tel',
  'bro',
  'fen',
  'gal',
  'ha',
  'jun',
  'lor',
  'nim',
  'pex',
  'qua',
  'ros',
  'vel',
  'wy',
];
const SECOND_SYLLABLES = [
  'vak',
  'bel',
  'dor',
  'fin',
  'gex',
  'lum',
  'mar',
  'nok',
  'pil',
  'rud',
  'sek',
  'tam',
  'vin',
  'wox',
  'zul',
  'ot',
];

/** The world's 256 entities, every pairing of the syllables ("zor vak", "mi bel"): names no pretrained text has. */
export const SYNTHETIC_QA_ENTITIES: readonly string[] = FIRST_SYLLABLES.flatMap((a) =>
  SECOND_SYLLABLES.map((b) => `${a} ${b}`),
);

/** Attribute → the values an entity may have. */
export const SYNTHETIC_QA_ATTRIBUTES = {
  color: ['red', 'blue', 'green', 'teal', 'amber', 'violet', 'black', 'white', 'gray', 'pink', 'gold', 'brown'],
  city: ['paris', 'tokyo', 'lima', 'cairo', 'oslo', 'rome', 'delhi', 'quito', 'dakar', 'perth', 'seoul', 'lagos'],
  animal: ['fox', 'owl', 'wolf', 'bear', 'hare', 'lynx', 'crow', 'seal', 'frog', 'moth', 'toad', 'deer'],
} as const satisfies Record<string, readonly string[]>;

export type SyntheticQaAttribute = keyof typeof SYNTHETIC_QA_ATTRIBUTES;
const ATTRIBUTES = Object.keys(SYNTHETIC_QA_ATTRIBUTES) as SyntheticQaAttribute[];

/** Independent of the seed: the seed changes which values the entities have, not the words. */
export const syntheticQaTokenizer = new WordTokenizer({
  specialTokens: SEARCH_SPECIAL_TOKENS,
  words: [
    ...FIRST_SYLLABLES,
    ...SECOND_SYLLABLES,
    ...ATTRIBUTES,
    'of',
    ...Object.values(SYNTHETIC_QA_ATTRIBUTES).flat(),
  ],
});

/**
 * Chat template (Jinja, Hugging Face's apply_chat_template); the space after <|user|> starts the first word's token.
 */
export const SYNTHETIC_QA_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|> ' + message['content'] }}" +
  "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>' + message['content'] + '</s>' }}{% endif %}{% endfor " +
  '%}' +
  "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";

/** tokenizer.json and tokenizer_config.json of the task's word vocabulary, as a checkpoint stores them. */
export function syntheticQaTokenizerFiles(): { tokenizerJson: object; tokenizerConfig: Record<string, unknown> } {
  return builtinTokenizerFiles(syntheticQaTokenizer, SYNTHETIC_QA_CHAT_TEMPLATE);
}

export interface SyntheticQaFact {
  entity: string;
  attribute: SyntheticQaAttribute;
  value: string;
}

function drawFacts(rng: Rng): SyntheticQaFact[] {
  return SYNTHETIC_QA_ENTITIES.flatMap((entity) =>
    ATTRIBUTES.map((attribute) => {
      const values = SYNTHETIC_QA_ATTRIBUTES[attribute];
      return { entity, attribute, value: values[Math.floor(rng.next() * values.length)] };
    }),
  );
}

/** Every (entity, attribute) fact of the world drawn with `seed`, entity by entity. */
export function syntheticQaFacts(seed: number): SyntheticQaFact[] {
  return drawFacts(new Rng(seed));
}

/** One document per fact: the entity as title (first line), then the fact as a sentence. */
function syntheticQaCorpus(facts: readonly SyntheticQaFact[]): CorpusDocument[] {
  return facts.map((f, i) => ({ id: String(i), contents: `${f.entity}\n${f.entity} ${f.attribute} ${f.value}` }));
}

/** A corpus as JSONL, one {id, contents} per line: the corpus file format of Search-R1's retrievers. */
export function corpusJsonl(docs: readonly CorpusDocument[]): string {
  return docs.map((d) => `${JSON.stringify({ id: d.id, contents: d.contents })}\n`).join('');
}

function syntheticQaQuestion(fact: Pick<SyntheticQaFact, 'entity' | 'attribute'>): string {
  return `${fact.attribute} of ${fact.entity}`;
}

/** The query the demonstrations search with ("zor vak color"); BM25 ranks the fact's own document first for it. */
export function syntheticQaSearchQuery(fact: Pick<SyntheticQaFact, 'entity' | 'attribute'>): string {
  return `${fact.entity} ${fact.attribute}`;
}

function record(fact: SyntheticQaFact, split: string, index: number): RlRecord {
  return {
    where: `built-in synthetic_qa ${split} row ${index}`,
    row: {
      data_source: SYNTHETIC_QA_DATA_SOURCE,
      prompt: [{ role: 'user', content: syntheticQaQuestion(fact) }],
      ability: 'fact-reasoning',
      reward_model: { style: 'rule', ground_truth: { target: [fact.value] } },
      extra_info: { split, index, entity: fact.entity, attribute: fact.attribute },
    },
  };
}

/**
 * The world drawn with `seed` as a retriever corpus, and its facts as training and validation questions:
 * `valSize` facts are held out (at most one per entity, each value still answered by some training question)
 * and every other fact is a training question.
 */
export function syntheticQaDataset(config: { seed: number; valSize: number }): {
  train: RlRecord[];
  val: RlRecord[];
  corpus: CorpusDocument[];
} {
  if (!Number.isInteger(config.valSize) || config.valSize < 0 || config.valSize > SYNTHETIC_QA_ENTITIES.length) {
    throw new Error(
      `synthetic_qa task: valSize must be an integer in [0, ${SYNTHETIC_QA_ENTITIES.length}] (one held-out fact per ` +
        `entity at most), got ${config.valSize}`,
    );
  }
  const rng = new Rng(config.seed);
  const facts = drawFacts(rng);
  const order = facts.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const answerKey = (f: SyntheticQaFact) => `${f.attribute} ${f.value}`;
  /** How many facts not held out so far have each (attribute, value) answer. */
  const trainAnswerCount = new Map<string, number>();
  for (const f of facts) trainAnswerCount.set(answerKey(f), (trainAnswerCount.get(answerKey(f)) ?? 0) + 1);
  const heldOutEntities = new Set<string>();
  const val: SyntheticQaFact[] = [];
  const train: SyntheticQaFact[] = [];
  for (const i of order) {
    const f = facts[i];
    const count = trainAnswerCount.get(answerKey(f))!;
    if (val.length < config.valSize && !heldOutEntities.has(f.entity) && count > 1) {
      heldOutEntities.add(f.entity);
      trainAnswerCount.set(answerKey(f), count - 1);
      val.push(f);
    } else {
      train.push(f);
    }
  }
  if (val.length < config.valSize)
    throw new Error(
      `synthetic_qa task: only ${val.length} of ${config.valSize} validation facts can be held out with seed ` +
        `${config.seed}`,
    );
  return {
    train: train.map((f, i) => record(f, 'train', i)),
    val: val.map((f, i) => record(f, 'test', i)),
    corpus: syntheticQaCorpus(facts),
  };
}

/**
 * The retrieved documents as the rollout shows them (the task's stand-in for Search-R1's "Doc 1(Title: t) text"):
 * each document's fact sentence, title dropped since the sentence names the entity: " zor vak color teal".
 */
export function formatDocuments(docs: readonly CorpusDocument[]): string {
  const sentence = (doc: CorpusDocument) => doc.contents.slice(doc.contents.indexOf('\n') + 1);
  return docs
    .map((doc) =>
      sentence(doc)
        .split(/\s+/)
        .filter((w) => w !== '')
        .map((w) => ` ${w}`)
        .join(''),
    )
    .join('');
}

/** What the rollout inserts after </search>: the formatted documents between the information tags. */
export function formatObservation(docsText: string): string {
  return `<information>${docsText}</information>`;
}

/** A row's fact, read back from its extra_info (entity, attribute) and ground truth (the value). */
export function syntheticQaFact(example: Pick<RlExample, 'where' | 'extraInfo' | 'groundTruth'>): SyntheticQaFact {
  const { entity, attribute } = example.extraInfo;
  const target = (example.groundTruth as { target?: unknown } | null)?.target;
  if (typeof entity !== 'string' || !SYNTHETIC_QA_ENTITIES.includes(entity)) {
    throw new Error(
      `${example.where}: extra_info.entity must be one of the synthetic_qa entities, got ${JSON.stringify(entity)}`,
    );
  }
  if (typeof attribute !== 'string' || !(ATTRIBUTES as string[]).includes(attribute)) {
    throw new Error(
      `${example.where}: extra_info.attribute must be one of ${ATTRIBUTES.join(', ')}, got ` +
        `${JSON.stringify(attribute)}`,
    );
  }
  const values: readonly string[] = SYNTHETIC_QA_ATTRIBUTES[attribute as SyntheticQaAttribute];
  if (!Array.isArray(target) || target.length !== 1 || !values.includes(target[0])) {
    throw new Error(
      `${example.where}: reward_model.ground_truth must be {target: [one ${attribute} value]}, got ` +
        `${JSON.stringify(example.groundTruth)}`,
    );
  }
  return { entity, attribute: attribute as SyntheticQaAttribute, value: target[0] };
}

export interface DemonstrationSegment {
  text: string;
  /** True for text the policy writes, false for text the rollout inserts (the observation). */
  generated: boolean;
  ids: number[];
}

/**
 * A response for supervised warm starting; its segments' ids concatenated are the tokens of their texts concatenated.
 */
export interface Demonstration {
  segments: DemonstrationSegment[];
  ids: number[];
  /** Per token of `ids`: 1 where the policy generates it (trained on), 0 where the rollout inserts it. */
  generatedMask: number[];
}

function demonstration(parts: readonly { text: string; generated: boolean }[]): Demonstration {
  const segments = parts.map((p) => ({ ...p, ids: syntheticQaTokenizer.encode(p.text) }));
  return {
    segments,
    ids: segments.flatMap((s) => s.ids),
    generatedMask: segments.flatMap((s) => s.ids.map(() => (s.generated ? 1 : 0))),
  };
}

function answerText(value: string): string {
  return `<answer> ${value}</answer></s>`;
}

/**
 * The response that searches and then answers: "<search> zor vak color</search>", the observation (not generated:
 * formatObservation(formatDocuments(docs)) for the documents the retriever returns for syntheticQaSearchQuery),
 * then "<answer> teal</answer></s>".
 */
export function searchDemonstration(
  example: Pick<RlExample, 'where' | 'extraInfo' | 'groundTruth'>,
  observation: string,
): Demonstration {
  const fact = syntheticQaFact(example);
  return demonstration([
    { text: `<search> ${syntheticQaSearchQuery(fact)}</search>`, generated: true },
    { text: observation, generated: false },
    { text: answerText(fact.value), generated: true },
  ]);
}

/**
 * The response that answers at once, without searching: the attribute's most common value, whoever is asked
 * ("<answer> red</answer></s>") — a guess that is right only when that is the fact, and that teaches the model
 * nothing about a particular entity that would compete with reading the observation.
 */
export function guessDemonstration(example: Pick<RlExample, 'where' | 'extraInfo' | 'groundTruth'>): Demonstration {
  const fact = syntheticQaFact(example);
  return demonstration([{ text: answerText(SYNTHETIC_QA_ATTRIBUTES[fact.attribute][0]), generated: true }]);
}
