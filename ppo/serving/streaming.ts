// One sample's text as it streams: at each read of the decode batch, the text its new tokens add, held back where a
// stop string could still begin (vLLM's stop_buffer_length: the longest stop string less one character), so a
// stream never sends text that the stop string later cuts; the last chunk carries the rest and the finish reason.
import { IncrementalText, alternativeTexts, cutAtStop, finishedText, type Decoder } from './completion-text.ts';
import type { TopAlternatives } from '../generation/continuous-batching.ts';
import type { GenerationRequest } from './generation-request.ts';
import type { StreamDelta } from './openai.ts';
import type { SampleResult } from './scheduler.ts';

type TextRequest = Pick<GenerationRequest, 'stop' | 'stopTokenIds' | 'keepStopString' | 'skipSpecialTokens'>;

export class SampleStream {
  readonly tokens: number[] = [];
  readonly logprobs: number[] = [];
  /** Per token so far, its alternatives (when the request asked for them). */
  readonly top: { ids: number[][]; logprobs: number[][] } | null;
  private readonly incremental: IncrementalText;
  /** Characters of the text sent so far. */
  private sent = 0;
  private readonly holdBack: number;

  constructor(
    private readonly tokenizer: Decoder,
    private readonly promptIds: readonly number[],
    private readonly request: TextRequest & Pick<GenerationRequest, 'topLogprobs'>,
    readonly index: number,
  ) {
    this.top = request.topLogprobs > 0 ? { ids: [], logprobs: [] } : null;
    this.incremental = new IncrementalText(tokenizer, promptIds, request.skipSpecialTokens);
    this.holdBack = Math.max(0, ...request.stop.map((s) => s.length - 1));
  }

  /** The sample's text so far, as sent. */
  get text(): string {
    return this.incremental.text.slice(0, this.sent);
  }

  /** Tokens read from the batch: the text they make final, and each token's own text. */
  async add(
    tokens: readonly number[],
    logprobs: readonly number[],
    top: readonly TopAlternatives[],
  ): Promise<StreamDelta> {
    const textOffset = this.incremental.text.length;
    const first = this.tokens.length;
    const tokenTexts = await this.incremental.push(tokens);
    this.tokens.push(...tokens);
    this.logprobs.push(...logprobs);
    let alternatives: StreamDelta['top'] = null;
    if (this.top) {
      const { skipSpecialTokens } = this.request;
      const texts = await alternativeTexts(this.tokenizer, this.promptIds, this.tokens, top, skipSpecialTokens, first);
      alternatives = { ids: top.map((a) => a.ids), logprobs: top.map((a) => a.logprobs), texts };
      this.top.ids.push(...alternatives.ids);
      this.top.logprobs.push(...alternatives.logprobs);
    }
    const whole = this.incremental.text;
    const visible = cutAtStop(whole, this.request)?.text ?? whole.slice(0, whole.length - this.holdBack);
    const text = this.take(visible);
    return { index: this.index, text, tokens, logprobs, tokenTexts, textOffset, end: null, top: alternatives };
  }

  /** The sample ended: the rest of its text (cut at its stop string) and why it ended. */
  async finish(result: SampleResult): Promise<StreamDelta> {
    const textOffset = this.incremental.text.length;
    await this.incremental.flush();
    const end = finishedText(this.incremental.text, [], result, this.request);
    const text = this.take(end.text);
    return { index: this.index, text, tokens: [], logprobs: [], tokenTexts: [], textOffset, end, top: null };
  }

  private take(visible: string): string {
    const text = visible.slice(this.sent);
    this.sent = Math.max(this.sent, visible.length);
    return text;
  }
}
