// Preference pairs in the shapes reward-model datasets come in, tokenized as the reward model reads them. TRL's
// RewardTrainer columns `chosen` / `rejected`, each plain text or a list of chat messages, with or without a shared
// `prompt` (text before both answers, or messages before both conversations), and an optional `margin` column;
// OpenRLHF's reward datasets are the same with their own column names (chosen_key / rejected_key / prompt_key).
// A conversation is rendered by the tokenizer's chat template (no generation prompt: the answer is in it); plain
// text is prompt + answer, ending with the EOS token as TRL appends it, so the score is read at the same kind of
// token in every row. Browser-safe.
import { applyChatTemplate, type ChatMessage, type ChatTemplate } from '../../models/chat-template.ts';
import type { Tokenizer } from '../../models/tokenizer.ts';
import type { RlRecord } from '../data/dataset.ts';

export interface PreferencePair {
  where: string;
  chosen: number[];
  rejected: number[];
  /** TRL's margin column: the loss is −log σ(r_chosen − r_rejected − margin); 0 without one. */
  margin: number;
}

export interface PreferenceColumns {
  promptKey: string;
  chosenKey: string;
  rejectedKey: string;
  marginKey: string;
}

export interface PreferencePairOptions extends PreferenceColumns {
  tokenizer: Pick<Tokenizer, 'encode' | 'special'>;
  /** Needed only for rows given as chat messages. */
  template: ChatTemplate | null;
  /** Pairs whose longer side exceeds it are dropped, as TRL's RewardTrainer filters them. */
  maxLength: number;
}

function isMessages(value: unknown): value is ChatMessage[] {
  return (
    Array.isArray(value) &&
    value.every(
      (m) => m !== null && typeof m === 'object' && typeof m.role === 'string' && typeof m.content === 'string',
    )
  );
}

async function tokenizeSide(
  record: RlRecord,
  key: string,
  prompt: unknown,
  options: PreferencePairOptions,
): Promise<number[]> {
  const answer = record.row[key];
  const fail = (what: string) => new Error(`${record.where}: '${key}' ${what}`);
  if (typeof answer === 'string') {
    if (prompt !== undefined && typeof prompt !== 'string')
      throw fail(`is text but '${options.promptKey}' is not: give both as text or both as chat messages`);
    const ids = await options.tokenizer.encode(`${prompt ?? ''}${answer}`);
    const eos = options.tokenizer.special.eos?.id;
    return eos !== undefined && ids[ids.length - 1] !== eos ? [...ids, eos] : ids;
  }
  if (isMessages(answer)) {
    if (prompt !== undefined && !isMessages(prompt))
      throw fail(
        `is a list of chat messages but '${options.promptKey}' is not: give both as text or both as chat messages`,
      );
    if (!options.template) throw fail('is a list of chat messages but the tokenizer has no chat template');
    return (await applyChatTemplate(options.tokenizer, options.template, [...(prompt ?? []), ...answer])).ids;
  }
  if (answer === undefined) throw fail(`is missing (columns: ${Object.keys(record.row).join(', ')})`);
  throw fail('must be text or a list of {role, content} chat messages');
}

/** The pairs of `records` in order; `dropped` counts those longer than maxLength. */
export async function buildPreferencePairs(
  records: readonly RlRecord[],
  options: PreferencePairOptions,
): Promise<{ pairs: PreferencePair[]; dropped: number }> {
  const pairs: PreferencePair[] = [];
  let dropped = 0;
  for (const record of records) {
    const prompt = record.row[options.promptKey] ?? undefined;
    const chosen = await tokenizeSide(record, options.chosenKey, prompt, options);
    const rejected = await tokenizeSide(record, options.rejectedKey, prompt, options);
    const margin = record.row[options.marginKey] ?? 0;
    if (typeof margin !== 'number' || !Number.isFinite(margin))
      throw new Error(`${record.where}: '${options.marginKey}' is ${JSON.stringify(margin)}, expected a number`);
    if (Math.max(chosen.length, rejected.length) > options.maxLength) dropped++;
    else pairs.push({ where: record.where, chosen, rejected, margin });
  }
  return { pairs, dropped };
}
