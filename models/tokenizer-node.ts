// Node side of the tokenizer: Hugging Face's official Rust bindings (`tokenizers`) behind the Tokenizer
// interface of tokenizer.ts, and loading a model directory's tokenizer files.

import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Tokenizer as NativeTokenizerImpl } from 'tokenizers';
import {
  type Tokenizer,
  type TokenizerConfig,
  type SpecialTokens,
  type EncodeOptions,
  type DecodeOptions,
  JsTokenizer,
  TokenizerError,
  resolveSpecialTokens,
  cleanUpTokenizationSpaces,
  specialAddedTokenIds,
} from './tokenizer.ts';

export type TokenizerBackend = 'native' | 'js';

/** The Rust `tokenizers` bindings: the reference implementation transformers itself uses. */
export class NativeTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly special: SpecialTokens;
  private readonly cleanUp: boolean;

  private constructor(
    private readonly impl: NativeTokenizerImpl,
    config: TokenizerConfig,
    specialTokensMap: TokenizerConfig | null,
    readonly skippedIds: ReadonlySet<number>,
  ) {
    this.vocabSize = impl.getVocabSize(true);
    this.special = resolveSpecialTokens(config, specialTokensMap, (t) => impl.tokenToId(t) ?? undefined);
    this.cleanUp = config.clean_up_tokenization_spaces === true;
  }

  static fromJson(
    tokenizerJson: string,
    config: TokenizerConfig = {},
    specialTokensMap: TokenizerConfig | null = null,
  ): NativeTokenizer {
    // The library parses first, so a broken file gets its error (it names the position and what it expected).
    const impl = NativeTokenizerImpl.fromString(tokenizerJson);
    // The bindings do not list their added tokens: the file does.
    const skipped = specialAddedTokenIds(JSON.parse(tokenizerJson) as object);
    return new NativeTokenizer(impl, config, specialTokensMap, skipped);
  }

  async encode(text: string, options: EncodeOptions = {}): Promise<number[]> {
    const encoding = await this.impl.encode(text, null, { addSpecialTokens: options.addSpecialTokens ?? true });
    return encoding.getIds();
  }

  async decode(ids: readonly number[], options: DecodeOptions = {}): Promise<string> {
    const text = await this.impl.decode([...ids], options.skipSpecialTokens ?? false);
    return this.cleanUp ? cleanUpTokenizationSpaces(text) : text;
  }

  async decodeBatch(ids: readonly (readonly number[])[], options: DecodeOptions = {}): Promise<string[]> {
    const texts = await this.impl.decodeBatch(
      ids.map((sequence) => [...sequence]),
      options.skipSpecialTokens ?? false,
    );
    return this.cleanUp ? texts.map(cleanUpTokenizationSpaces) : texts;
  }
}

export interface TokenizerFiles {
  /** tokenizer.json text. */
  tokenizerJson: string;
  /** tokenizer_config.json ({} when absent). */
  config: TokenizerConfig;
  specialTokensMap: TokenizerConfig | null;
  /** chat_template.jinja, where newer transformers save the template instead of tokenizer_config.json. */
  chatTemplateFile: string | null;
}

async function readOptional(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

function parseJsonObject(text: string, path: string): TokenizerConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new TokenizerError(`${path}: not valid JSON (${(err as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new TokenizerError(`${path}: expected a JSON object`);
  return json as TokenizerConfig;
}

export async function readTokenizerFiles(dir: string): Promise<TokenizerFiles> {
  const isDirectory = await stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDirectory)
    throw new TokenizerError(`${dir}: no such directory (expected a Hugging Face model or tokenizer directory)`);
  const tokenizerJson = await readOptional(join(dir, 'tokenizer.json'));
  if (tokenizerJson === null)
    throw new TokenizerError(`${dir}: no tokenizer.json (only fast-tokenizer checkpoints are supported)`);
  const configText = await readOptional(join(dir, 'tokenizer_config.json'));
  const mapText = await readOptional(join(dir, 'special_tokens_map.json'));
  return {
    tokenizerJson,
    config: configText === null ? {} : parseJsonObject(configText, join(dir, 'tokenizer_config.json')),
    specialTokensMap: mapText === null ? null : parseJsonObject(mapText, join(dir, 'special_tokens_map.json')),
    chatTemplateFile: await readOptional(join(dir, 'chat_template.jinja')),
  };
}

/** Loads a model directory's tokenizer with the native bindings (default) or the pure-JS backend. */
export async function loadTokenizer(dir: string, backend: TokenizerBackend = 'native'): Promise<Tokenizer> {
  const files = await readTokenizerFiles(dir);
  try {
    return backend === 'native'
      ? NativeTokenizer.fromJson(files.tokenizerJson, files.config, files.specialTokensMap)
      : JsTokenizer.fromJson(JSON.parse(files.tokenizerJson), files.config, files.specialTokensMap);
  } catch (err) {
    // The parsers' own messages ("EOF while parsing a string at line 1 column 5") name no file.
    throw new TokenizerError(
      `${join(dir, 'tokenizer.json')}: cannot load it as a tokenizer (${(err as Error).message})`,
    );
  }
}
