// One sample's text as it streams: at each read of the decode batch, the text its new tokens add, held back where a
// stop string could still begin (vLLM's stop_buffer_length: the longest stop string less one character), so a
// stream never sends text that the stop string later cuts; the last chunk carries the rest and the finish reason.
import type { Tokenizer } from '../../models/tokenizer.ts';
import { IncrementalText, cutAtStop, finishedText } from './completion-text.ts';
import type { GenerationRequest } from './generation-request.ts';
import type { StreamDelta } from './openai.ts';
import type { SampleResult } from './scheduler.ts';

type TextRequest = Pick<GenerationRequest, 'stop' | 'stopTokenIds' | 'keepStopString' | 'skipSpecialTokens'>;

export class SampleStream {
  readonly tokens: number[] = [];
  readonly logprobs: number[] = [];
  private readonly incremental: IncrementalText;
  /** Characters of the text sent so far. */
  private sent = 0;
  private readonly holdBack: number;

  constructor(
    tokenizer: Pick<Tokenizer, 'decode'>,
    promptIds: readonly number[],
    private readonly request: TextRequest,
    readonly index: number,
  ) {
    this.incremental = new IncrementalText(tokenizer, promptIds, request.skipSpecialTokens);
    this.holdBack = Math.max(0, ...request.stop.map((s) => s.length - 1));
  }

  /** The sample's text so far, as sent. */
  get text(): string {
    return this.incremental.text.slice(0, this.sent);
  }

  /** Tokens read from the batch: the text they make final, and each token's own text. */
  async add(tokens: readonly number[], logprobs: readonly number[]): Promise<StreamDelta> {
    const textOffset = this.incremental.text.length;
    const tokenTexts = await this.incremental.push(tokens);
    this.tokens.push(...tokens);
    this.logprobs.push(...logprobs);
    const whole = this.incremental.text;
    const visible = cutAtStop(whole, this.request)?.text ?? whole.slice(0, whole.length - this.holdBack);
    return { index: this.index, text: this.take(visible), tokens, logprobs, tokenTexts, textOffset, end: null };
  }

  /** The sample ended: the rest of its text (cut at its stop string) and why it ended. */
  async finish(result: SampleResult): Promise<StreamDelta> {
    const textOffset = this.incremental.text.length;
    await this.incremental.flush();
    const end = finishedText(this.incremental.text, [], result, this.request);
    return { index: this.index, text: this.take(end.text), tokens: [], logprobs: [], tokenTexts: [], textOffset, end };
  }

  private take(visible: string): string {
    const text = visible.slice(this.sent);
    this.sent = Math.max(this.sent, visible.length);
    return text;
  }
}
