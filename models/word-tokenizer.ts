// A word-level tokenizer for the built-in tasks: one id per special token and per whole word, so short sentences stay a
// few tokens long. A word token carries its leading space (" zorvak", as GPT-2's byte-level vocabularies do), which
// makes decoding a plain concatenation. Text encodes word for word when it is special tokens and words, each word
// written after exactly one space: "<answer> teal</answer>"; in "<answer>teal" or a foreign word " mauve" the piece
// that is not a word is the unknown token, as Hugging Face encodes it. Its tokenizer.json is a WordLevel model over
// those tokens (word-level-tokenizer.ts).
import { WordLevelTokenizer } from './word-level-tokenizer.ts';

export interface WordVocabulary {
  /** Each begins with "<", which no word contains, so a special token never hides inside a word. */
  specialTokens: readonly string[];
  /** Bare words ("zorvak"): no whitespace and no "<". */
  words: readonly string[];
}

function checkedWordTokens(vocabulary: WordVocabulary): string[] {
  for (const special of vocabulary.specialTokens) {
    if (!special.startsWith('<'))
      throw new Error(`word tokenizer: special token ${JSON.stringify(special)} must begin with "<"`);
  }
  return vocabulary.words.map((word) => {
    if (!/^[^\s<]+$/.test(word))
      throw new Error(`word tokenizer: word ${JSON.stringify(word)} must be non-empty, without whitespace or "<"`);
    return ` ${word}`;
  });
}

export class WordTokenizer extends WordLevelTokenizer {
  constructor(readonly vocabulary: WordVocabulary) {
    super('word tokenizer', vocabulary.specialTokens, checkedWordTokens(vocabulary), {
      pattern: / [^ <]+/gu,
      hfRegex: ' [^ <]+',
    });
  }
}
