// A character-level tokenizer for the built-in tasks: one id per special token and per character. Its
// tokenizer.json is a WordLevel model over single characters (word-level-tokenizer.ts).
import { WordLevelTokenizer } from './word-level-tokenizer.ts';

export interface CharVocabulary {
  specialTokens: readonly string[];
  characters: string;
}

export class CharTokenizer extends WordLevelTokenizer {
  constructor(readonly vocabulary: CharVocabulary) {
    // [^] is one character, newline included. HF's '.' skips newlines and Split keeps an unmatched stretch as one
    // piece: a lone newline still gets its id there, but a run of them becomes one unknown piece.
    // biome-ignore lint/correctness/noEmptyCharacterClassInRegex: [^] is any code point, newline included
    super('char tokenizer', vocabulary.specialTokens, [...vocabulary.characters], { pattern: /[^]/gu, hfRegex: '.' });
  }
}
