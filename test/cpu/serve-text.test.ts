// A served sample's text with each tokenizer the project reads (stories260K's SentencePiece, a byte-level BPE as
// Qwen3's, the built-in word-level one): decoded with the prompt as context it keeps the space that separates it from
// the prompt (decoded alone, SentencePiece drops it: "Lily.She"), the token texts join to the text, a character split
// over byte tokens appears only whole, and a stream's chunks join to the same text, never sending what a stop string
// later cuts. Also: the scheduler's abort and its observer, the JSON depth and prompt byte limits.
import { describe, it, expect } from 'vitest';
import { IncrementalText, completionText, type Decoder } from '../../ppo/serving/completion-text.ts';
import { SampleStream } from '../../ppo/serving/streaming.ts';
import { Scheduler, type SampleResult } from '../../ppo/serving/scheduler.ts';
import { jsonDepth } from '../../ppo/serving/http-server-node.ts';
import { promptByteLimit } from '../../ppo/serving/model-host-node.ts';
import { JsTokenizer, type Tokenizer } from '../../models/tokenizer.ts';
import { loadTokenizer } from '../../models/tokenizer-node.ts';
import { arithmeticTokenizer } from '../../ppo/tasks/arithmetic.ts';
import { syntheticQaTokenizer } from '../../ppo/tasks/synthetic-qa.ts';
import { builtinTokenizerFiles, type WordLevelTokenizer } from '../../models/word-level-tokenizer.ts';
import { describeWithFixtures, fixturePath } from '../support/fixtures.ts';
import type { SampleQueue } from '../../ppo/generation/continuous-batching.ts';

/** A prompt and completion in the built-in word vocabulary (each word a token with its leading space). */
const WORDS = { prompt: ' zor of', completion: ' teal paris fox' };

const request = { stop: [], stopTokenIds: [], keepStopString: false, skipSpecialTokens: true, topLogprobs: 0 };

/** GPT-2's bytes_to_unicode: the byte-level BPE alphabet. */
function byteAlphabet(): string[] {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  let next = 256;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable(b) ? b : next++));
}

/** A byte-level BPE tokenizer as Qwen3's is built (ByteLevel pre-tokenizer and decoder), with a few merges. */
function byteLevelTokenizer(): Tokenizer {
  const alphabet = byteAlphabet();
  const merges = ['Ġ L', 'ĠL i', 'ĠLi l', 'ĠLil y', 'Ġ s', 'Ġs h', 'Ġsh e'];
  const vocab: Record<string, number> = {};
  for (const c of alphabet) vocab[c] = Object.keys(vocab).length;
  for (const m of merges) vocab[m.replace(' ', '')] = Object.keys(vocab).length;
  vocab['<|endoftext|>'] = Object.keys(vocab).length;
  return JsTokenizer.fromJson(
    {
      version: '1.0',
      added_tokens: [{ id: vocab['<|endoftext|>'], content: '<|endoftext|>', special: true, normalized: false }],
      normalizer: null,
      pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
      post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
      model: { type: 'BPE', vocab, merges, unk_token: null, byte_fallback: false },
    },
    { eos_token: '<|endoftext|>' },
  );
}

/** The prompt's and the completion's ids, as a model that continued the prompt with `completion` would draw them. */
async function split(t: Tokenizer, prompt: string, completion: string) {
  const promptIds = await t.encode(prompt);
  const all = await t.encode(prompt + completion);
  expect(all.slice(0, promptIds.length), 'the completion starts a new token').toEqual(promptIds);
  return { promptIds, tokens: all.slice(promptIds.length) };
}

const sample = (tokens: number[], reason: SampleResult['reason'] = 'length'): SampleResult => ({
  prompt: 0,
  tokens,
  logprobs: new Float32Array(tokens.length),
  top: null,
  reason,
});

/** `t` as IncrementalText sees it, with these skippedIds, counting its decodeBatch calls and their windows. */
function countingDecoder(t: Tokenizer, skippedIds: ReadonlySet<number>) {
  const count = { calls: 0, windows: [] as (readonly number[])[] };
  const decoder: Decoder = {
    skippedIds,
    decode: (ids, options) => t.decode(ids, options),
    decodeBatch: (ids, options) => {
      count.calls++;
      count.windows.push(...ids);
      return t.decodeBatch(ids, options);
    },
  };
  return { count, decoder };
}

/**
 * Special tokens among a response's tokens (`at`: where, in the tokens without them; a position twice: two in a row)
 * give with the tokenizer's skippedIds the texts, token texts and final flush of decoding every window (skippedIds
 * empty: the tokenizer drops them itself), with and without skip_special_tokens; with it no window ends on one, and a
 * response whose last tokens add text or are dropped needs no call to flush.
 */
async function checkDroppedTokens(t: Tokenizer, prompt: string, completion: string, specials: number[], at: number[]) {
  const { promptIds, tokens: plain } = await split(t, prompt, completion);
  const tokens = [...plain];
  for (const [k, position] of [...at.entries()].sort((a, b) => b[1] - a[1]))
    tokens.splice(position, 0, specials[k % specials.length]);
  expect(specials.every((id) => t.skippedIds.has(id))).toBe(true);
  const endsOnSpecial = (windows: (readonly number[])[]) => windows.filter((w) => specials.includes(w.at(-1)!)).length;
  for (const skip of [true, false]) {
    const reference = countingDecoder(t, new Set());
    const oneAtATime = new IncrementalText(reference.decoder, promptIds, skip);
    const texts: string[] = [];
    for (const token of tokens) texts.push(...(await oneAtATime.push([token])));
    const referenceEnd = await oneAtATime.flush();
    const dropping = countingDecoder(t, t.skippedIds);
    const atOnce = new IncrementalText(dropping.decoder, promptIds, skip);
    expect(await atOnce.push(tokens)).toEqual(texts);
    expect(await atOnce.flush()).toBe(referenceEnd);
    expect(atOnce.text).toBe(oneAtATime.text);
    expect(endsOnSpecial(reference.count.windows)).toBeGreaterThan(0);
    expect(endsOnSpecial(dropping.count.windows) === 0).toBe(skip);
  }
  const tokensThenEnd = [...tokens, ...specials];
  const completed = countingDecoder(t, t.skippedIds);
  await completionText(completed.decoder, sample(tokensThenEnd), promptIds, request);
  const pushOnly = countingDecoder(t, t.skippedIds);
  await new IncrementalText(pushOnly.decoder, promptIds, true).push(tokensThenEnd);
  expect(completed.count.calls).toBe(pushOnly.count.calls);
}

function checkTokenizer(name: string, load: () => Promise<Tokenizer>, prompt: string, completion: string) {
  it(`${name}: the completion keeps its leading space, and its token texts join to it`, async () => {
    const t = await load();
    const { promptIds, tokens } = await split(t, prompt, completion);
    const c = await completionText(t, sample(tokens), promptIds, request);
    expect(c.text).toBe(completion);
    expect(c.tokenTexts.join('')).toBe(completion);
    expect(c.tokenTexts).toHaveLength(tokens.length);
  });

  it(`${name}: a stream's chunks join to the text, and a stop string is never sent`, async () => {
    const t = await load();
    const { promptIds, tokens } = await split(t, prompt, completion);
    const stop = completion.trim().slice(2, 4);
    const stream = new SampleStream(t, promptIds, { ...request, stop: [stop] }, 0);
    let sent = '';
    for (const token of tokens) sent += (await stream.add([token], [0], [])).text;
    expect(sent.includes(stop)).toBe(false);
    const end = await stream.finish(sample(tokens, 'stop'));
    expect(sent + end.text).toBe(completion.slice(0, completion.indexOf(stop)));
    expect(end.end).toMatchObject({ finishReason: 'stop', matched: stop });
  });
}

describeWithFixtures('served text: stories260K SentencePiece', ['hf/stories260K/tokenizer.json'], () => {
  const load = () => loadTokenizer(fixturePath('hf/stories260K'));
  checkTokenizer('stories260K', load, 'Once upon a time, there was a little girl named Lily.', ' She loved to play.');

  it('decoded alone, the completion loses its space (what the prompt context fixes)', async () => {
    const t = await load();
    const { tokens } = await split(t, 'a girl named Lily.', ' She loved');
    expect(await t.decode(tokens, { skipSpecialTokens: true })).toBe('She loved');
  });

  it('a character split over byte-fallback tokens appears only whole, in the token that completes it', async () => {
    const t = await load();
    const { promptIds, tokens } = await split(t, 'Lily saw a', ' 😀 cat');
    const incremental = new IncrementalText(t, promptIds, true);
    const texts = await incremental.push(tokens);
    expect(texts.join('')).toBe(' 😀 cat');
    expect(texts.some((x) => x.includes('\uFFFD'))).toBe(false);
    // The emoji's 4 bytes are 4 tokens: the first 3 add nothing, the 4th the whole character.
    const emoji = texts.findIndex((x) => x.includes('😀'));
    expect(texts.slice(emoji - 3, emoji)).toEqual(['', '', '']);
  });

  it('tokens pushed at once add what they add one at a time, in one tokenizer call and one per token adding nothing', async () => {
    const t = await load();
    const { promptIds, tokens } = await split(t, 'Lily saw a', ' 😀 cat');
    const oneAtATime = new IncrementalText(t, promptIds, true);
    const texts: string[] = [];
    for (const token of tokens) texts.push(...(await oneAtATime.push([token])));
    let calls = 0;
    const counted: Decoder = {
      skippedIds: t.skippedIds,
      decode: (ids, options) => t.decode(ids, options),
      decodeBatch: (ids, options) => {
        calls++;
        return t.decodeBatch(ids, options);
      },
    };
    const atOnce = new IncrementalText(counted, promptIds, true);
    expect(await atOnce.push(tokens)).toEqual(texts);
    expect(atOnce.text).toBe(oneAtATime.text);
    // The emoji's first 3 bytes add nothing: after each the next round plans its windows again.
    expect(calls).toBe(4);
  });

  it('an answer whose tokens all add text is decoded in one tokenizer call, as one token at a time decodes it', async () => {
    const t = await load();
    const { promptIds, tokens } = await split(t, 'Lily saw a', ' big red cat. She ran to her mom and said hello.');
    const oneAtATime = new IncrementalText(t, promptIds, true);
    const texts: string[] = [];
    for (const token of tokens) texts.push(...(await oneAtATime.push([token])));
    const counted = countingDecoder(t, new Set());
    const atOnce = new IncrementalText(counted.decoder, promptIds, true);
    expect(await atOnce.push(tokens)).toEqual(texts);
    expect(tokens.length).toBeGreaterThan(8);
    // Windows planned 4 tokens at a time, doubling, took 3 calls here.
    expect(counted.count.calls).toBe(1);
  });

  it('special tokens add nothing and cost no window: the texts of decoding each window (<unk>, <s>, </s>)', async () => {
    const t = await load();
    // Among the emoji's byte tokens, two in a row, first and last.
    await checkDroppedTokens(t, 'Lily saw a', ' 😀 cat. She ran', [0, 1, 2], [0, 2, 3, 3, 6, 9]);
    // Last tokens: an incomplete character, then a special token: flush still decodes (U+FFFD).
    const { promptIds, tokens } = await split(t, 'Lily saw a', ' 😀');
    const cut = [...tokens.slice(0, -1), 2];
    const oneAtATime = new IncrementalText(countingDecoder(t, new Set()).decoder, promptIds, true);
    for (const token of cut) await oneAtATime.push([token]);
    const dropping = new IncrementalText(t, promptIds, true);
    await dropping.push(cut);
    const end = await dropping.flush();
    expect(end).toBe(await oneAtATime.flush());
    expect(end).toContain('\uFFFD');
  });

  it('a long response whose tokens often add nothing decodes windows in proportion to its length', async () => {
    const t = await load();
    // 30 emojis of 4 byte-fallback tokens each: 3 of every 4 tokens add nothing.
    const { promptIds, tokens } = await split(t, 'Lily saw', ` ${'😀'.repeat(30)} cat`);
    const oneAtATime = new IncrementalText(t, promptIds, true);
    const texts: string[] = [];
    for (const token of tokens) texts.push(...(await oneAtATime.push([token])));
    let windows = 0;
    const counted: Decoder = {
      skippedIds: t.skippedIds,
      decode: (ids, options) => t.decode(ids, options),
      decodeBatch: (ids, options) => {
        windows += ids.length;
        return t.decodeBatch(ids, options);
      },
    };
    const atOnce = new IncrementalText(counted, promptIds, true);
    expect(await atOnce.push(tokens)).toEqual(texts);
    expect(atOnce.text).toBe(oneAtATime.text);
    expect(tokens.length).toBeGreaterThan(120);
    // Planning every token left after each that adds nothing took ~93 windows per token here.
    expect(windows / tokens.length).toBeLessThan(10);
  });
});

describe('served text: byte-level BPE and the built-in tokenizer', () => {
  checkTokenizer('byte-level BPE', async () => byteLevelTokenizer(), 'a girl named Lily.', ' Lily: she is é');
  const builtin = (t: WordLevelTokenizer) => async () => {
    const files = builtinTokenizerFiles(t, '');
    return JsTokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  };
  checkTokenizer('built-in characters', builtin(arithmeticTokenizer), '1+2=', '3+45');
  checkTokenizer('built-in words', builtin(syntheticQaTokenizer), WORDS.prompt, WORDS.completion);

  it('a special token adds nothing and costs no window: the texts of decoding each window', async () => {
    const t = byteLevelTokenizer();
    await checkDroppedTokens(t, 'a girl named Lily.', ' Lily: she is é', [t.special.eos!.id], [0, 3, 5, 5, 8]);
  });

  it('a special token ends the text without adding to it (skip_special_tokens)', async () => {
    const t = byteLevelTokenizer();
    const { promptIds, tokens } = await split(t, 'Lily', ' she');
    const eos = t.special.eos!.id;
    const c = await completionText(t, sample([...tokens, eos], 'eos'), promptIds, request);
    expect(c).toMatchObject({ text: ' she', finishReason: 'stop', matched: eos, eos: true });
    expect(c.tokenTexts.at(-1)).toBe('');
  });
});

describe('serve scheduler: abort and observers', () => {
  /** A loop that takes one sample per turn, gives it two tokens, and ends it; cancelled samples end at once. */
  const loop = async (queue: SampleQueue) => {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      const [s] = queue.take(1);
      if (!s) return;
      if (!s.cancelled) {
        await s.progress.take([4, 5]);
        s.onTokens?.([4, 5], [-1, -2], []);
      }
      queue.finished(s, Float32Array.of(-1, -2));
    }
  };
  const base = {
    prompts: [[1]],
    budget: 2,
    sampling: { temperature: 1, topK: -1, topP: 1, seed: 3 },
    sampleOffset: 0,
    stopStrings: [],
    stopTokenIds: [],
    adapter: null,
  };

  it("ends an aborted request's waiting samples at once with reason 'abort', and counts it once", async () => {
    let aborted = 0;
    const scheduler = new Scheduler(
      loop,
      [],
      async () => '',
      () => aborted++,
    );
    const controller = new AbortController();
    const seen: string[] = [];
    const observer = {
      tokens: (j: number, tokens: readonly number[]) => seen.push(`${j}:${tokens.join(',')}`),
      finished: (j: number, r: SampleResult) => {
        seen.push(`${j}:${r.reason}`);
        // Abort (twice) as the first sample ends, before the loop's next turn takes another: no timing involved.
        if (j === 0) {
          controller.abort();
          controller.abort();
        }
      },
    };
    const got = await scheduler.generate({ ...base, n: 3, signal: controller.signal, observer });
    expect(got[0]).toMatchObject({ tokens: [4, 5], reason: 'length' });
    expect(got.slice(1).every((r) => r.reason === 'abort')).toBe(true);
    expect(seen.slice(0, 2)).toEqual(['0:4,5', '0:length']);
    expect(aborted).toBe(1);
    expect(scheduler.pendingSamples).toBe(0);
    // A request aborted before it was queued ends at once; the scheduler keeps serving.
    const early = new AbortController();
    early.abort();
    expect((await scheduler.generate({ ...base, n: 2, signal: early.signal })).map((r) => r.reason)).toEqual([
      'abort',
      'abort',
    ]);
    expect((await scheduler.generate({ ...base, n: 1 }))[0].tokens).toEqual([4, 5]);
  });
});

describe('serve request limits', () => {
  it('measures JSON nesting in one pass, skipping strings', () => {
    expect(jsonDepth('{"a": [1, {"b": "[[[{{{"}]}')).toBe(3);
    expect(jsonDepth('"\\"[["')).toBe(0);
    expect(jsonDepth('['.repeat(100_000))).toBe(100_000);
  });

  it("bounds a prompt's bytes by the longest token (byte fallback, added tokens, WordPiece's unknown word)", () => {
    expect(promptByteLimit(JSON.stringify({ model: { vocab: { a: 0, '▁abc': 1 } } }), 10)).toBe(10 * 6 * 4);
    const unigram = { model: { vocab: [['<0x0A>', 0]] }, added_tokens: [{ content: '<|im_start|>' }] };
    expect(promptByteLimit(JSON.stringify(unigram), 1)).toBe(12 * 4);
    expect(promptByteLimit(JSON.stringify({ model: { vocab: { a: 0 }, max_input_chars_per_word: 100 } }), 1)).toBe(
      1600,
    );
  });
});
