// A finished sample as the protocols report it: its text (special tokens skipped or not, cut before the stop
// string that ended it unless asked to keep it), why it ended (OpenAI's "stop" / "length") and what it matched
// (vLLM's stop_reason, SGLang's finish_reason.matched: the stop token id or stop string; null for EOS in vLLM).
import type { Tokenizer } from '../../models/tokenizer.ts';
import type { SampleResult } from './scheduler.ts';
import type { GenerationRequest } from './generation-request.ts';

export interface CompletionText {
  text: string;
  finishReason: 'stop' | 'length';
  /** The stop string or stop token id that ended the sample; the EOS id for SGLang; null at the budget. */
  matched: string | number | null;
  /** The sample ended on one of the model's EOS ids (vLLM reports stop_reason null for it). */
  eos: boolean;
}

export async function completionText(
  tokenizer: Pick<Tokenizer, 'decode'>,
  sample: SampleResult,
  request: Pick<GenerationRequest, 'stop' | 'stopTokenIds' | 'keepStopString' | 'skipSpecialTokens'>,
): Promise<CompletionText> {
  const text = await tokenizer.decode(sample.tokens, { skipSpecialTokens: request.skipSpecialTokens });
  const last = sample.tokens[sample.tokens.length - 1];
  if (sample.reason === 'eos') return { text, finishReason: 'stop', matched: last, eos: true };
  if (sample.reason === 'length') return { text, finishReason: 'length', matched: null, eos: false };
  if (request.stopTokenIds.includes(last)) return { text, finishReason: 'stop', matched: last, eos: false };
  // A stop string: the first that occurs; the text ends before it (or after it when kept).
  let cut = { at: text.length, stop: request.stop[0] ?? '' };
  for (const stop of request.stop) {
    const at = text.indexOf(stop);
    if (at >= 0 && at < cut.at) cut = { at, stop };
  }
  return {
    text: text.slice(0, cut.at + (request.keepStopString ? cut.stop.length : 0)),
    finishReason: 'stop',
    matched: cut.stop,
    eos: false,
  };
}

/** Each token's own text (the `tokens` of OpenAI's logprobs). */
export function tokenTexts(tokenizer: Pick<Tokenizer, 'decode'>, tokens: readonly number[]): Promise<string[]> {
  return Promise.all(tokens.map((t) => tokenizer.decode([t], { skipSpecialTokens: false })));
}
