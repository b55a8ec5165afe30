// A sample's text as the protocols report it, decoded incrementally with the prompt as context (vLLM's
// detokenize_incrementally, SGLang's DetokenizerManager): a SentencePiece tokenizer drops the leading space of the
// first token it decodes ("▁Lily" alone is "Lily"), so a completion decoded on its own loses the space that
// separates it from the prompt, and each token decoded alone loses its own. Decoding a window that starts a few
// tokens back and keeping what the new tokens add keeps every space, and a token that ends inside a UTF-8 character
// adds nothing until the token that completes it. Each token's own text (OpenAI's log-prob `tokens`) is what it
// added, so the token texts join to the text and text_offset points into it. The text is cut before the stop string
// that ended the sample unless asked to keep it; the finish reason is OpenAI's ("stop" / "length" / vLLM's
// "abort"), and `matched` what ended it (vLLM's stop_reason, SGLang's finish_reason.matched).
import type { Tokenizer } from '../../models/tokenizer.ts';
import type { SampleResult } from './scheduler.ts';
import type { GenerationRequest } from './generation-request.ts';
import type { TopAlternatives } from '../generation/continuous-batching.ts';

/** vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET: prompt tokens decoded as context before the first new one. */
const PROMPT_CONTEXT_TOKENS = 5;

/**
 * Tokens IncrementalText.push plans windows for after a token that added nothing; twice as many in each call after
 * one whose tokens all added text. Its first call plans every token pushed (a finished answer's text in one
 * tokenizer call where every token adds text, the usual case); planning every token left after each that added
 * nothing decoded O(n²) windows for a response whose tokens often add nothing (a character's byte-fallback pieces,
 * skipped special tokens: a random model's 26-token answers took 232 windows each).
 */
const FIRST_PLANNED_TOKENS = 4;

/** What a half-decoded UTF-8 sequence decodes to: the text waits for the next token. */
const REPLACEMENT = '\uFFFD';

export type Decoder = Pick<Tokenizer, 'decode' | 'decodeBatch' | 'skippedIds'>;
type TextRequest = Pick<GenerationRequest, 'stop' | 'stopTokenIds' | 'keepStopString' | 'skipSpecialTokens'>;

/** One sample's text as tokens arrive: the prompt's last tokens are context, never part of the text. */
export class IncrementalText {
  private readonly ids: number[];
  private prefixOffset: number;
  private readOffset: number;
  /** The generated tokens' text so far. */
  text = '';

  constructor(
    private readonly tokenizer: Decoder,
    promptIds: readonly number[],
    private readonly skipSpecialTokens: boolean,
  ) {
    this.ids = promptIds.slice(-PROMPT_CONTEXT_TOKENS);
    this.prefixOffset = 0;
    this.readOffset = this.ids.length;
  }

  /**
   * A token decoding drops (a special token, with skipSpecialTokens): every window decodes as it would without it,
   * so it adds nothing and moves no offset, as decoding its windows would find; no tokenizer call is made for it.
   */
  private dropped(id: number): boolean {
    return this.skipSpecialTokens && this.tokenizer.skippedIds.has(id);
  }

  /** Appends tokens; returns the text each added (empty while it leaves a character incomplete). */
  async push(tokens: readonly number[]): Promise<string[]> {
    const added: string[] = [];
    let planned = tokens.length;
    while (added.length < tokens.length) {
      // The windows each token decodes if every token before it adds text (the usual case), in one call of the
      // tokenizer instead of two per token; from the first token that adds nothing, the next round plans again.
      const first = this.ids.length;
      this.ids.push(...tokens.slice(added.length, added.length + planned));
      const plan: { prefix: number; read: number; end: number }[] = [];
      for (let end = first + 1, prefix = this.prefixOffset, read = this.readOffset; end <= this.ids.length; end++) {
        if (this.dropped(this.ids[end - 1])) continue;
        plan.push({ prefix, read, end });
        [prefix, read] = [read, end];
      }
      const texts =
        plan.length === 0
          ? []
          : await this.tokenizer.decodeBatch(
              plan.flatMap((w) => [this.ids.slice(w.prefix, w.read), this.ids.slice(w.prefix, w.end)]),
              { skipSpecialTokens: this.skipSpecialTokens },
            );
      planned *= 2;
      for (let end = first + 1, k = 0; end <= this.ids.length; end++) {
        if (this.dropped(this.ids[end - 1])) {
          added.push('');
          continue;
        }
        const w = plan[k];
        if (w.prefix !== this.prefixOffset || w.read !== this.readOffset) {
          this.ids.length = w.end - 1;
          planned = FIRST_PLANNED_TOKENS;
          break;
        }
        added.push(this.advance(texts[2 * k], texts[2 * k + 1], w.end, false));
        k++;
      }
    }
    return added;
  }

  /** At the end of the sample: an incomplete character's bytes as the tokenizer decodes them (U+FFFD). */
  async flush(): Promise<string> {
    // Nothing after the read offset but dropped tokens: the whole window decodes as the prefix, which adds nothing.
    if (this.ids.slice(this.readOffset).every((id) => this.dropped(id))) return '';
    const [prefix, whole] = await this.tokenizer.decodeBatch(
      [this.ids.slice(this.prefixOffset, this.readOffset), this.ids.slice(this.prefixOffset)],
      { skipSpecialTokens: this.skipSpecialTokens },
    );
    return this.advance(prefix, whole, this.ids.length, true);
  }

  /** What the tokens up to `end` add, from the window before them decoded (`prefix`) and with them (`whole`). */
  private advance(prefix: string, whole: string, end: number, final: boolean): string {
    if (whole.length <= prefix.length || (!final && whole.endsWith(REPLACEMENT))) return '';
    const delta = whole.slice(prefix.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = end;
    this.text += delta;
    return delta;
  }
}

export interface CompletionText {
  text: string;
  finishReason: 'stop' | 'length' | 'abort';
  /** The stop string or stop token id that ended the sample; the EOS id for SGLang; null at the budget. */
  matched: string | number | null;
  /** The sample ended on one of the model's EOS ids (vLLM reports stop_reason null for it). */
  eos: boolean;
  /** Each token's own text (log-probs' `tokens`): they join to the uncut text. */
  tokenTexts: string[];
}

/** The earliest stop string in `text`, and the text cut before it (or after it when kept); null when none occurs. */
export function cutAtStop(text: string, request: TextRequest): { text: string; stop: string } | null {
  let cut: { at: number; stop: string } | null = null;
  for (const stop of request.stop) {
    const at = text.indexOf(stop);
    if (at >= 0 && (cut === null || at < cut.at)) cut = { at, stop };
  }
  return cut && { text: text.slice(0, cut.at + (request.keepStopString ? cut.stop.length : 0)), stop: cut.stop };
}

/** A finished sample's text, decoded after `promptIds`, with what ended it. */
export async function completionText(
  tokenizer: Decoder,
  sample: SampleResult,
  promptIds: readonly number[],
  request: TextRequest,
): Promise<CompletionText> {
  const incremental = new IncrementalText(tokenizer, promptIds, request.skipSpecialTokens);
  const tokenTexts = await incremental.push(sample.tokens);
  if (tokenTexts.length > 0) tokenTexts[tokenTexts.length - 1] += await incremental.flush();
  return finishedText(incremental.text, tokenTexts, sample, request);
}

/** The text and finish reason of a sample whose (uncut) text is `text`. */
export function finishedText(
  text: string,
  tokenTexts: string[],
  sample: Pick<SampleResult, 'tokens' | 'reason'>,
  request: TextRequest,
): CompletionText {
  const last = sample.tokens[sample.tokens.length - 1];
  const ended = (finishReason: CompletionText['finishReason'], matched: string | number | null, eos = false) => ({
    text,
    finishReason,
    matched,
    eos,
    tokenTexts,
  });
  if (sample.reason === 'eos') return ended('stop', last, true);
  if (sample.reason === 'length') return ended('length', null);
  if (sample.reason === 'abort') return ended('abort', null);
  if (request.stopTokenIds.includes(last)) return ended('stop', last);
  const cut = cutAtStop(text, request);
  // The generator saw the stop string in the tokens decoded alone; with the prompt's context it may read otherwise.
  if (cut === null) return ended('stop', request.stop[0] ?? null);
  return { ...ended('stop', cut.stop), text: cut.text };
}

/**
 * The text each alternative would have added where it stands (after the prompt and the tokens before it), as the
 * sampled token's own text is read: top[i] holds the alternatives of tokens[first + i].
 */
export function alternativeTexts(
  tokenizer: Decoder,
  promptIds: readonly number[],
  tokens: readonly number[],
  top: readonly TopAlternatives[],
  skipSpecialTokens: boolean,
  first = 0,
): Promise<string[][]> {
  const options = { skipSpecialTokens };
  const ids = [...promptIds, ...tokens];
  return Promise.all(
    top.map(async (alternatives, i) => {
      const at = promptIds.length + first + i;
      const context = ids.slice(Math.max(0, at - PROMPT_CONTEXT_TOKENS), at);
      const before = await tokenizer.decode(context, options);
      return Promise.all(
        alternatives.ids.map(async (id) => (await tokenizer.decode([...context, id], options)).slice(before.length)),
      );
    }),
  );
}
