import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JsTokenizer, cleanUpTokenizationSpaces, type Tokenizer } from '../../models/tokenizer.ts';
import { loadTokenizer, readTokenizerFiles, NativeTokenizer } from '../../models/tokenizer-node.ts';
import { describeWithFixtures, fixturePath, readFixtureJson } from '../support/fixtures.ts';

const STORIES = fixturePath('hf/stories260K');
const STORIES_FILES = [
  'hf/stories260K/tokenizer.json',
  'hf/stories260K/tokenizer_config.json',
  'hf/stories260K/fixtures.json',
];

describeWithFixtures('stories260K', STORIES_FILES, () => {
  const fixtures = readFixtureJson('hf/stories260K/fixtures.json');
  const cases: { text: string; ids_with_bos: number[] }[] = fixtures.tokenizer_cases;

  describe.each(['native', 'js'] as const)('%s tokenizer on stories260K', (backend) => {
    let tokenizer: Tokenizer;
    const load = async () => (tokenizer ??= await loadTokenizer(STORIES, backend));

    it('vocabulary and special tokens', async () => {
      const t = await load();
      expect(t.vocabSize).toBe(512);
      expect(t.special).toEqual({
        bos: { token: '<s>', id: 1 },
        eos: { token: '</s>', id: 2 },
        pad: null,
        unk: { token: '<unk>', id: 0 },
      });
      expect([...t.skippedIds].sort()).toEqual([0, 1, 2]);
    });

    it('skippedIds: the added tokens marked special, which decoding drops; an added token not marked special stays', async () => {
      const json = JSON.parse(readFileSync(join(STORIES, 'tokenizer.json'), 'utf8'));
      json.added_tokens.push({ ...json.added_tokens[0], id: 512, content: '<think>', special: false });
      const t = backend === 'native' ? NativeTokenizer.fromJson(JSON.stringify(json)) : JsTokenizer.fromJson(json, {});
      expect([...t.skippedIds].sort()).toEqual([0, 1, 2]);
      // Dropped before decoding: the text around a special token is the text without it.
      expect(await t.decode([261, 2, 1, 261], { skipSpecialTokens: true })).toBe(await t.decode([261, 261]));
      expect(await t.decode([261, 512, 261], { skipSpecialTokens: true })).toContain('<think>');
    });

    it.each(cases.map((c) => [JSON.stringify(c.text).slice(0, 40), c] as const))(
      'encodes and decodes %s exactly',
      async (_, c) => {
        const t = await load();
        expect(await t.encode(c.text)).toEqual(c.ids_with_bos);
        expect(await t.encode(c.text, { addSpecialTokens: false })).toEqual(c.ids_with_bos.slice(1));
        expect(await t.decode(c.ids_with_bos, { skipSpecialTokens: true })).toBe(c.text);
      },
    );

    it('decodes the greedy story to the recorded text, and keeps special tokens unless told', async () => {
      const t = await load();
      const { output_ids: ids, text } = fixtures.greedy_from_bos;
      expect(await t.decode(ids, { skipSpecialTokens: true })).toBe(text);
      expect(await t.decode([1, 261, 2])).toBe('<s> a</s>');
    });
  });

  describe('tokenizer configuration', () => {
    it(
      'both backends agree with the special tokens given as AddedToken objects or only in ' + 'special_tokens_map.json',
      async () => {
        const files = await readTokenizerFiles(STORIES);
        const config = { ...files.config, bos_token: { content: '<s>', lstrip: false }, eos_token: undefined };
        const map = { eos_token: '</s>' };
        for (const t of [
          NativeTokenizer.fromJson(files.tokenizerJson, config, map),
          JsTokenizer.fromJson(JSON.parse(files.tokenizerJson), config, map),
        ]) {
          expect(t.special.bos).toEqual({ token: '<s>', id: 1 });
          expect(t.special.eos).toEqual({ token: '</s>', id: 2 });
        }
      },
    );

    it('a special token missing from the vocabulary is an error', async () => {
      const files = await readTokenizerFiles(STORIES);
      expect(() => NativeTokenizer.fromJson(files.tokenizerJson, { ...files.config, pad_token: '<pad>' })).toThrow(
        /pad_token "<pad>" is not in the tokenizer's vocabulary/,
      );
    });

    it('clean_up_tokenization_spaces as transformers applies it', async () => {
      const files = await readTokenizerFiles(STORIES);
      const ids = await NativeTokenizer.fromJson(files.tokenizerJson, files.config).encode('a , b', {
        addSpecialTokens: false,
      });
      for (const t of [
        NativeTokenizer.fromJson(files.tokenizerJson, { ...files.config, clean_up_tokenization_spaces: true }),
        JsTokenizer.fromJson(JSON.parse(files.tokenizerJson), { ...files.config, clean_up_tokenization_spaces: true }),
      ]) {
        expect(await t.decode(ids)).toBe('a, b');
      }
    });
  });
});

describe('tokenizer files', () => {
  it('clean_up_tokenization_spaces on text', () => {
    expect(cleanUpTokenizationSpaces("Hi , it 's done . Is n't it ?")).toBe("Hi, it's done. Isn't it?");
  });

  it('a directory without tokenizer.json is a clear error', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'model-without-tokenizer-'));
    try {
      await writeFile(join(dir, 'config.json'), '{}');
      await expect(loadTokenizer(dir)).rejects.toThrow(/model-without-tokenizer-\w+: no tokenizer\.json/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
