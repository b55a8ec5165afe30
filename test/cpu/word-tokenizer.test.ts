import { describe, it, expect } from 'vitest';
import { WordTokenizer } from '../../models/word-tokenizer.ts';
import { JsTokenizer, type Tokenizer } from '../../models/tokenizer.ts';
import { NativeTokenizer } from '../../models/tokenizer-node.ts';

// '<e>' is a prefix of '<e>x>': both backends extract added tokens leftmost-longest, and so must the class.
const words = new WordTokenizer({
  specialTokens: ['<pad>', '</s>', '<|user|>', '<answer>', '</answer>', '<e>', '<e>x>'],
  words: ['zorvak', 'color', 'of', 'teal', 'x>', '1(Title:'],
});
const json = words.toHfTokenizerJson();
const config = { eos_token: '</s>', pad_token: '<pad>' };
const backends: [string, Tokenizer][] = [
  ['native', NativeTokenizer.fromJson(JSON.stringify(json), config)],
  ['js', JsTokenizer.fromJson(json, config)],
];

const TEXTS = [
  '<|user|> color of zorvak',
  '<answer> teal</answer></s>',
  ' zorvak color teal',
  '<answer><answer></answer> teal teal</s><pad>',
  ' 1(Title: zorvak<e>x> x><e> x>',
];
// Text from outside the vocabulary (a foreign retriever's document): every backend gives the unknown token the same
// way.
const FOREIGN_TEXTS = [
  ' mauve',
  '<answer>teal',
  ' teal </answer>',
  ' teal  teal',
  'Doc 1(Title: Zorvak) Zorvak is teal.\n',
  ' zorvak\u00e9 teal',
];

describe.each(backends)('word tokenizer through the %s backend', (_, backend) => {
  it('has the same vocabulary and special tokens', () => {
    expect(backend.vocabSize).toBe(words.vocabSize);
    expect(backend.special.eos).toEqual({ token: '</s>', id: words.tokenId('</s>') });
  });

  it.each(TEXTS)('encodes and decodes %j as the class does', async (text) => {
    const ids = words.encode(text);
    expect(await backend.encode(text)).toEqual(ids);
    expect(await backend.decode(ids)).toBe(text);
    expect(await backend.decode(ids, { skipSpecialTokens: true })).toBe(words.decode(ids, { skipSpecialTokens: true }));
  });

  it.each(FOREIGN_TEXTS)('encodes %j, which has words outside the vocabulary, as the class does', async (text) => {
    const ids = words.encode(text);
    expect(ids).toContain(words.tokenId(words.unkToken));
    expect(await backend.encode(text)).toEqual(ids);
  });
});

describe('word tokenizer', () => {
  it('one token per word (with its leading space) and per special token; decode inverts encode', () => {
    expect(words.encode('<|user|> color of zorvak')).toEqual([
      2,
      words.tokenId(' color'),
      words.tokenId(' of'),
      words.tokenId(' zorvak'),
    ]);
    expect(words.encode('<e>x>')).toEqual([words.tokenId('<e>x>')]);
    for (const text of TEXTS) expect(words.decode(words.encode(text))).toBe(text);
    expect(words.decode(words.encode('<answer> teal</answer>'), { skipSpecialTokens: true })).toBe(' teal');
  });

  it('a piece outside the vocabulary is the unknown token (the first special), as WordLevel maps it', () => {
    const unk = words.tokenId('<pad>');
    expect(words.unkToken).toBe('<pad>');
    expect(words.encode(' mauve')).toEqual([unk]);
    expect(words.encode('<answer>teal')).toEqual([words.tokenId('<answer>'), unk]);
    expect(words.encode(' teal </answer>')).toEqual([words.tokenId(' teal'), unk, words.tokenId('</answer>')]);
    expect(words.encode(' teal  teal')).toEqual([words.tokenId(' teal'), unk, words.tokenId(' teal')]);
    expect((json as { model: { unk_token: string } }).model.unk_token).toBe('<pad>');
  });

  it('rejects vocabularies it could not split back into their words', () => {
    expect(() => new WordTokenizer({ specialTokens: ['<pad>'], words: ['two words'] })).toThrow(
      /word "two words" must be non-empty, without whitespace or "<"/,
    );
    expect(() => new WordTokenizer({ specialTokens: ['<pad>'], words: ['a<b'] })).toThrow(/without whitespace or "<"/);
    expect(() => new WordTokenizer({ specialTokens: ['[PAD]'], words: ['a'] })).toThrow(
      /special token "\[PAD\]" must begin with "<"/,
    );
    expect(() => new WordTokenizer({ specialTokens: ['<pad>'], words: ['a', 'a'] })).toThrow(/token " a" listed twice/);
  });
});
