// The shared core of the built-in tasks' tokenizers (no downloaded vocabulary): a fixed list of special tokens,
// recognised anywhere in the text, then one id per piece the text splits into (a character, a word). Each writes
// itself as a Hugging Face tokenizer.json — a WordLevel model over those pieces, a Split pre-tokenizer that cuts
// the text the same way and a Fuse decoder — so a checkpoint of a model trained on it is a complete HF directory,
// and both tokenizer backends (models/tokenizer.ts) give the ids this class gives.

/** How text between special tokens is cut into pieces: `pattern` here, `hfRegex` in tokenizer.json. */
export interface PieceSplit {
  /** Global (`g`) pattern of one piece: what `hfRegex` matches, in JavaScript. */
  pattern: RegExp;
  hfRegex: string;
}

export abstract class WordLevelTokenizer {
  private readonly idOf = new Map<string, number>();
  /** Longest first: Hugging Face extracts added tokens leftmost-longest. */
  private readonly specialsByLength: readonly string[];
  readonly tokens: readonly string[];
  readonly specialIds: ReadonlySet<number>;
  /** What a piece outside the vocabulary encodes to (WordLevel's unk_token): the first special token. */
  readonly unkToken: string;
  private readonly unkId: number;

  /** `name` prefixes every error ("char tokenizer"). */
  protected constructor(
    private readonly name: string,
    private readonly specialTokens: readonly string[],
    pieces: readonly string[],
    private readonly split: PieceSplit,
  ) {
    if (!split.pattern.global) throw new Error(`${name}: the piece pattern ${split.pattern} must be global (flag g)`);
    if (specialTokens.length === 0)
      throw new Error(`${name}: needs at least one special token (the first is the unknown token)`);
    const tokens = [...specialTokens, ...pieces];
    tokens.forEach((t, i) => {
      if (this.idOf.has(t)) throw new Error(`${name}: token ${JSON.stringify(t)} listed twice`);
      this.idOf.set(t, i);
    });
    this.tokens = tokens;
    this.specialIds = new Set(specialTokens.map((_, i) => i));
    this.specialsByLength = [...specialTokens].sort((a, b) => b.length - a.length);
    this.unkToken = specialTokens[0];
    this.unkId = 0;
  }

  get vocabSize(): number {
    return this.tokens.length;
  }

  tokenId(token: string): number {
    const id = this.idOf.get(token);
    if (id === undefined) throw new Error(`${this.name}: no token ${JSON.stringify(token)}`);
    return id;
  }

  /**
   * The ids Hugging Face gives with this class's tokenizer.json: special tokens are cut out first, leftmost-longest;
   * the text between them splits into pieces at the pattern's matches, a stretch between matches being a piece of
   * its own (Split's Isolated behaviour); a piece outside the vocabulary is the unknown token (WordLevel's unk_token),
   * so text from outside the task (a foreign retriever's documents) encodes instead of failing.
   */
  encode(text: string): number[] {
    const ids: number[] = [];
    let start = 0;
    for (let i = 0; i < text.length; ) {
      const special = this.specialsByLength.find((s) => text.startsWith(s, i));
      if (special === undefined) {
        i++;
        continue;
      }
      this.encodePieces(text.slice(start, i), ids);
      ids.push(this.tokenId(special));
      i += special.length;
      start = i;
    }
    this.encodePieces(text.slice(start), ids);
    return ids;
  }

  private encodePieces(segment: string, ids: number[]): void {
    const piece = (text: string) => ids.push(this.idOf.get(text) ?? this.unkId);
    let end = 0;
    for (const match of segment.matchAll(this.split.pattern)) {
      if (match.index > end) piece(segment.slice(end, match.index));
      piece(match[0]);
      end = match.index + match[0].length;
    }
    if (end < segment.length) piece(segment.slice(end));
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    let text = '';
    for (const id of ids) {
      if (options.skipSpecialTokens && this.specialIds.has(id)) continue;
      const token = this.tokens[id];
      if (token === undefined) throw new Error(`${this.name}: id ${id} is outside the vocabulary of ${this.vocabSize}`);
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
      added_tokens: this.specialTokens.map((content, id) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      normalizer: null,
      pre_tokenizer: { type: 'Split', pattern: { Regex: this.split.hfRegex }, behavior: 'Isolated', invert: false },
      post_processor: null,
      decoder: { type: 'Fuse' },
      model: { type: 'WordLevel', vocab, unk_token: this.unkToken },
    };
  }
}

/**
 * tokenizer.json and tokenizer_config.json of a built-in task's vocabulary, as a checkpoint stores them: the
 * special tokens <s>, </s>, <pad> in their usual roles and the task's chat template.
 */
export function builtinTokenizerFiles(
  tokenizer: WordLevelTokenizer,
  chatTemplate: string,
): { tokenizerJson: object; tokenizerConfig: Record<string, unknown> } {
  return {
    tokenizerJson: tokenizer.toHfTokenizerJson(),
    tokenizerConfig: {
      bos_token: '<s>',
      eos_token: '</s>',
      pad_token: '<pad>',
      unk_token: tokenizer.unkToken,
      chat_template: chatTemplate,
      model_max_length: 256,
      tokenizer_class: 'PreTrainedTokenizerFast',
      clean_up_tokenization_spaces: false,
    },
  };
}
