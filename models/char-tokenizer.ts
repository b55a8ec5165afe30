// A character-level tokenizer for the built-in tasks (no downloaded vocabulary): one id per special token and
// per character. It can write itself as a Hugging Face tokenizer.json (WordLevel over single characters) so a
// checkpoint of a model trained on it is a complete HF directory.

export interface CharVocabulary {
  specialTokens: readonly string[];
  characters: string;
}

export class CharTokenizer {
  private readonly idOf = new Map<string, number>();
  readonly tokens: readonly string[];
  readonly specialIds: ReadonlySet<number>;

  constructor(readonly vocabulary: CharVocabulary) {
    const tokens = [...vocabulary.specialTokens, ...vocabulary.characters];
    tokens.forEach((t, i) => {
      if (this.idOf.has(t)) throw new Error(`char tokenizer: token ${JSON.stringify(t)} listed twice`);
      this.idOf.set(t, i);
    });
    this.tokens = tokens;
    this.specialIds = new Set(vocabulary.specialTokens.map((_, i) => i));
  }

  get vocabSize(): number {
    return this.tokens.length;
  }

  tokenId(token: string): number {
    const id = this.idOf.get(token);
    if (id === undefined) throw new Error(`char tokenizer: no token ${JSON.stringify(token)}`);
    return id;
  }

  /** Special tokens are recognised anywhere in the text; every other character must be in the vocabulary. */
  encode(text: string): number[] {
    const ids: number[] = [];
    let i = 0;
    outer: while (i < text.length) {
      for (const special of this.vocabulary.specialTokens) {
        if (text.startsWith(special, i)) {
          ids.push(this.tokenId(special));
          i += special.length;
          continue outer;
        }
      }
      const id = this.idOf.get(text[i]);
      if (id === undefined) throw new Error(`char tokenizer: character ${JSON.stringify(text[i])} is not in the vocabulary`);
      ids.push(id);
      i++;
    }
    return ids;
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    let text = '';
    for (const id of ids) {
      if (options.skipSpecialTokens && this.specialIds.has(id)) continue;
      const token = this.tokens[id];
      if (token === undefined) throw new Error(`char tokenizer: id ${id} is outside the vocabulary of ${this.vocabSize}`);
      text += token;
    }
    return text;
  }

  /** The same tokenizer in Hugging Face's tokenizer.json format. */
  toHfTokenizerJson(): object {
    const vocab: Record<string, number> = {};
    this.tokens.forEach((t, i) => (vocab[t] = i));
    return {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: this.vocabulary.specialTokens.map((content, id) => ({
        id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
      })),
      normalizer: null,
      pre_tokenizer: { type: 'Split', pattern: { Regex: '.' }, behavior: 'Isolated', invert: false },
      post_processor: null,
      decoder: { type: 'Fuse' },
      model: { type: 'WordLevel', vocab, unk_token: this.vocabulary.specialTokens[0] },
    };
  }
}
