// A prompt as a response reports it (OpenAI's echo, vLLM's prompt_logprobs, SGLang's input_token_logprobs): its
// text, each token's own text (decoded incrementally, as a sample's: they join to the decoded prompt), and, when it
// was scored on the device (ppo/generation/prompt-scoring.ts), each token's log-prob, rank and alternatives, the
// alternatives' texts being what each would have added where it stands.
import type { PromptScores } from '../generation/prompt-scoring.ts';
import { IncrementalText, alternativeTexts, type Decoder } from './completion-text.ts';

export interface ReportedPrompt {
  ids: readonly number[];
  /** The prompt's text: as the client gave it, else its ids decoded. */
  text: string;
  tokenTexts: string[];
  /** Token p ≥ 1's scores at index p − 1 (the first token has none); null when the request asked for none. */
  scores: ReportedScores | null;
}

export interface ReportedScores {
  logprobs: Float32Array;
  ranks: Uint32Array;
  /** Per scored token, its K alternatives (ids, log-probs, texts), most likely first. */
  top: { ids: number[][]; logprobs: number[][]; texts: string[][] };
  /** SGLang's token_ids_logprob: the tokens asked for and their log-probs at each scored token, row-major. */
  gathered: { ids: readonly number[]; logprobs: Float32Array } | null;
}

export async function reportPrompt(
  tokenizer: Decoder,
  ids: readonly number[],
  given: string | null,
  scores: PromptScores | null,
  skipSpecialTokens: boolean,
  gathered: readonly number[] | null = null,
): Promise<ReportedPrompt> {
  const incremental = new IncrementalText(tokenizer, [], skipSpecialTokens);
  const tokenTexts = await incremental.push(ids);
  if (tokenTexts.length > 0) tokenTexts[tokenTexts.length - 1] += await incremental.flush();
  const text = given ?? tokenTexts.join('');
  if (scores === null) return { ids, text, tokenTexts, scores: null };
  const { K } = scores.top;
  const top = Array.from({ length: scores.logprobs.length }, (_, p) => ({
    ids: Array.from(scores.top.ids.subarray(p * K, p * K + K)),
    logprobs: Array.from(scores.top.logprobs.subarray(p * K, p * K + K)),
  }));
  const texts = await alternativeTexts(tokenizer, [], ids, top, skipSpecialTokens, 1);
  return {
    ids,
    text,
    tokenTexts,
    scores: {
      logprobs: scores.logprobs,
      ranks: scores.ranks,
      top: { ids: top.map((a) => a.ids), logprobs: top.map((a) => a.logprobs), texts },
      gathered: gathered && { ids: gathered, logprobs: scores.gathered },
    },
  };
}

/**
 * vLLM's prompt_logprobs: null for the first token, then per token {token id: {logprob, rank, decoded_token}} of the
 * token itself and its N most likely alternatives (ranks 1 … N); N = -1: every token of the vocabulary.
 */
export function vllmPromptLogprobs(prompt: ReportedPrompt, N: number) {
  const s = prompt.scores;
  if (s === null) return null;
  return [
    null,
    ...prompt.ids.slice(1).map((id, p) => {
      const entry: Record<string, { logprob: number; rank: number; decoded_token: string }> = {
        [id]: { logprob: s.logprobs[p], rank: s.ranks[p], decoded_token: prompt.tokenTexts[p + 1] },
      };
      s.top.ids[p].slice(0, N === -1 ? undefined : N).forEach((alt, k) => {
        entry[alt] = { logprob: s.top.logprobs[p][k], rank: k + 1, decoded_token: s.top.texts[p][k] };
      });
      return entry;
    }),
  ];
}
