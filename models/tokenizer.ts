// One Tokenizer interface over two backends that give identical ids: Hugging Face's official Rust
// bindings (`tokenizers`, Node only: tokenizer-node.ts) and the pure-JS `@huggingface/tokenizers`
// (browser and Node, here). Both load a tokenizer.json plus tokenizer_config.json; special tokens and
// decode clean-up follow transformers' PreTrainedTokenizerFast.
// Browser-safe: takes parsed JSON, no file access.

import { Tokenizer as JsTokenizerImpl } from '@huggingface/tokenizers';

export interface EncodeOptions {
  /** Apply the tokenizer.json post-processor (e.g. prepend <s>); transformers' default is true. */
  addSpecialTokens?: boolean;
}

export interface DecodeOptions {
  skipSpecialTokens?: boolean;
}

export interface SpecialToken {
  token: string;
  id: number;
}

/** transformers' named special tokens; null where tokenizer_config.json sets none. */
export interface SpecialTokens {
  bos: SpecialToken | null;
  eos: SpecialToken | null;
  pad: SpecialToken | null;
  unk: SpecialToken | null;
}

export interface Tokenizer {
  encode(text: string, options?: EncodeOptions): Promise<number[]>;
  decode(ids: readonly number[], options?: DecodeOptions): Promise<string>;
  /** Each sequence decoded as decode() would, in one call (a server decodes many short windows per token). */
  decodeBatch(ids: readonly (readonly number[])[], options?: DecodeOptions): Promise<string[]>;
  /** len(tokenizer) in transformers: the vocabulary including added tokens (may be below config.vocab_size). */
  readonly vocabSize: number;
  readonly special: SpecialTokens;
  /**
   * The added tokens marked special in tokenizer.json: decoding with skipSpecialTokens drops them before the decoder
   * runs (both backends), so such a token changes no decoded text around it.
   */
  readonly skippedIds: ReadonlySet<number>;
}

/** tokenizer.json's added tokens marked special: the ids decode() drops with skipSpecialTokens. */
export function specialAddedTokenIds(tokenizerJson: object): ReadonlySet<number> {
  const added = (tokenizerJson as { added_tokens?: { id?: unknown; special?: unknown }[] }).added_tokens ?? [];
  return new Set(added.filter((t) => t.special === true && Number.isInteger(t.id)).map((t) => t.id as number));
}

/** The parts of tokenizer_config.json (and special_tokens_map.json) that shape tokenizing. */
export interface TokenizerConfig {
  bos_token?: unknown;
  eos_token?: unknown;
  pad_token?: unknown;
  unk_token?: unknown;
  clean_up_tokenization_spaces?: boolean;
  chat_template?: unknown;
  [key: string]: unknown;
}

export class TokenizerError extends Error {
  override name = 'TokenizerError';
}

/** A special token entry is a string or an AddedToken object ({content, ...}) in saved configs. */
function tokenContent(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  return null;
}

/**
 * Resolves bos/eos/pad/unk to (token, id). tokenizer_config.json wins over special_tokens_map.json; a token
 * named there but missing from the vocabulary is an error rather than a silent null.
 */
export function resolveSpecialTokens(
  config: TokenizerConfig,
  specialTokensMap: TokenizerConfig | null,
  tokenToId: (token: string) => number | undefined,
): SpecialTokens {
  const resolve = (key: 'bos_token' | 'eos_token' | 'pad_token' | 'unk_token'): SpecialToken | null => {
    const token = tokenContent(config[key]) ?? tokenContent(specialTokensMap?.[key]);
    if (token === null) return null;
    const id = tokenToId(token);
    if (id === undefined)
      throw new TokenizerError(
        `tokenizer_config.json: ${key} ${JSON.stringify(token)} is not in the tokenizer's vocabulary`,
      );
    return { token, id };
  };
  return { bos: resolve('bos_token'), eos: resolve('eos_token'), pad: resolve('pad_token'), unk: resolve('unk_token') };
}

/** transformers' clean_up_tokenization: drops the space tokenizers of the BERT era left before punctuation. */
export function cleanUpTokenizationSpaces(text: string): string {
  return text
    .replaceAll(' .', '.')
    .replaceAll(' ?', '?')
    .replaceAll(' !', '!')
    .replaceAll(' ,', ',')
    .replaceAll(" ' ", "'")
    .replaceAll(" n't", "n't")
    .replaceAll(" 'm", "'m")
    .replaceAll(" 's", "'s")
    .replaceAll(" 've", "'ve")
    .replaceAll(" 're", "'re");
}

/** Pure-JS backend: works in the browser; gives the same ids as the Rust bindings. */
export class JsTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly special: SpecialTokens;
  private readonly cleanUp: boolean;

  private constructor(
    private readonly impl: JsTokenizerImpl,
    config: TokenizerConfig,
    specialTokensMap: TokenizerConfig | null,
    readonly skippedIds: ReadonlySet<number>,
  ) {
    this.vocabSize = impl.get_vocab(true).size;
    this.special = resolveSpecialTokens(config, specialTokensMap, (t) => impl.token_to_id(t));
    // transformers (>= 4.45) defaults clean_up_tokenization_spaces to false.
    this.cleanUp = config.clean_up_tokenization_spaces === true;
  }

  /** From parsed tokenizer.json and tokenizer_config.json (and special_tokens_map.json if present). */
  static fromJson(
    tokenizerJson: object,
    config: TokenizerConfig = {},
    specialTokensMap: TokenizerConfig | null = null,
  ): JsTokenizer {
    // The JS library has no WordLevel model: its fallback takes the unknown token from tokenizer_config.json, where
    // Hugging Face's reads tokenizer.json's model.unk_token; without it a word outside the vocabulary has no id.
    const model = (tokenizerJson as { model?: { type?: unknown; unk_token?: unknown } }).model;
    const implConfig =
      model?.type === 'WordLevel' && typeof model.unk_token === 'string'
        ? { ...config, unk_token: model.unk_token }
        : config;
    return new JsTokenizer(
      new JsTokenizerImpl(tokenizerJson, implConfig),
      config,
      specialTokensMap,
      specialAddedTokenIds(tokenizerJson),
    );
  }

  async encode(text: string, options: EncodeOptions = {}): Promise<number[]> {
    return this.impl.encode(text, { add_special_tokens: options.addSpecialTokens ?? true }).ids;
  }

  async decode(ids: readonly number[], options: DecodeOptions = {}): Promise<string> {
    const text = this.impl.decode([...ids], {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
    return this.cleanUp ? cleanUpTokenizationSpaces(text) : text;
  }

  decodeBatch(ids: readonly (readonly number[])[], options: DecodeOptions = {}): Promise<string[]> {
    return Promise.all(ids.map((sequence) => this.decode(sequence, options)));
  }
}
