// How the experience's sequences go to the GPU in blocks (micro-batches): a fixed number of sequences each, or
// (use_dynamic_bsz) as many as a token budget allows, each padded only to its own longest prompt and response.
// The reference and critic forwards (ppo/phases/experience.ts) and the actor and critic updates
// (ppo/training/update-loop.ts) plan their micro-batches here.
import type { ExperienceRows } from './sequence-buffers.ts';

/** Rows of the experience and the window of columns they keep: the last promptLength prompt columns and the
 *  first responseLength response columns. */
export interface MicroBatchPlan {
  rows: number[];
  promptLength: number;
  responseLength: number;
}

/**
 * Sequences per micro-batch (null: all at once), or with `maxTokens` (use_dynamic_bsz) a token budget, padding
 * included.
 */
export interface MicroBatching {
  microBatchSize: number | null;
  maxTokens?: number | null;
  /** The config key of maxTokens, for errors. */
  maxTokensKey?: string;
}

/** Each row's real prompt tokens and response tokens (generated and observations). */
export function sequenceLengths(rows: ExperienceRows): { prompt: number[]; response: number[] } {
  const P = rows.promptLength;
  const count = (row: readonly number[], from: number, to: number) =>
    row.slice(from, to).reduce((n, m) => n + (m ? 1 : 0), 0);
  return {
    prompt: rows.attentionMask.map((m) => count(m, 0, P)),
    response: rows.attentionMask.map((m) => count(m, P, m.length)),
  };
}

/**
 * Splits `rows` into micro-batches. A fixed size keeps the experience's full window (and the rows' order). A token
 * budget is verl's rearrange_micro_batches for padded batches: verl packs sequences without padding and balances
 * their summed lengths; here a micro-batch is padded to its longest prompt and longest response, so rows go longest
 * first and each micro-batch takes rows while rows × (longest prompt + longest response) stays within the budget —
 * similar lengths together, little padding, never more tokens than the budget.
 */
export function planMicroBatches(
  rows: readonly number[],
  experience: ExperienceRows,
  split: MicroBatching,
): MicroBatchPlan[] {
  const P = experience.promptLength;
  const R = experience.responseLength;
  if (!split.maxTokens)
    return blocks(rows, split.microBatchSize ?? rows.length).map((r) => ({
      rows: r,
      promptLength: P,
      responseLength: R,
    }));
  const budget = split.maxTokens;
  const lengths = sequenceLengths(experience);
  // A row needs one response column even when empty: the gathers and losses need R ≥ 1.
  const prompt = (i: number) => Math.max(1, lengths.prompt[i]);
  const response = (i: number) => Math.max(1, lengths.response[i]);
  const order = [...rows].sort((a, b) => prompt(b) + response(b) - (prompt(a) + response(a)) || a - b);
  const plans: MicroBatchPlan[] = [];
  for (const i of order) {
    if (prompt(i) + response(i) > budget) {
      throw new Error(
        `${split.maxTokensKey ?? 'max_token_len'}=${budget} is below sequence ${i}'s ${prompt(i) + response(i)} ` +
          `tokens: raise it to at least the longest prompt + response`,
      );
    }
    const last = plans.at(-1);
    if (last) {
      const promptLength = Math.max(last.promptLength, prompt(i));
      const responseLength = Math.max(last.responseLength, response(i));
      if ((last.rows.length + 1) * (promptLength + responseLength) <= budget) {
        last.rows.push(i);
        last.promptLength = promptLength;
        last.responseLength = responseLength;
        continue;
      }
    }
    plans.push({ rows: [i], promptLength: prompt(i), responseLength: response(i) });
  }
  return plans;
}

/** Splits `indices` into consecutive blocks of `size` (the last may be shorter). */
export function blocks(indices: readonly number[], size: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < indices.length; i += size) out.push(indices.slice(i, i + size));
  return out;
}
