// The RLHF pipeline's data on the built-in arithmetic task (tools/rlhf-pipeline.js), as a user would bring it to
// each stage: SFT demonstrations (the warm start's annotators: a seeded share leave a trailing space after the
// sum) and preference pairs in TRL's conversational shape with a shared prompt, where the chosen answer is the bare
// correct sum, the one exact match accepts, and the rejected one a sloppy or wrong answer. Browser-safe.
import { Rng } from '../../engine/rng.ts';
import type { RlRecord } from '../data/dataset.ts';

/** One problem of the task as text: the user message and its correct sum. */
export interface ArithmeticQa {
  question: string;
  answer: string;
}

/** The kinds of rejected answer, each a way an answer fails exact match. */
export const REJECTED_KINDS = ['trailing space', 'off by some', 'extra text'] as const;
export type RejectedKind = (typeof REJECTED_KINDS)[number];

/** A pair as TRL's RewardTrainer reads it (conversational, shared prompt). */
export interface PreferencePairRow {
  prompt: { role: 'user'; content: string }[];
  chosen: { role: 'assistant'; content: string }[];
  rejected: { role: 'assistant'; content: string }[];
}

/** The question and sum of the task's verl-schema rows (ppo/tasks/arithmetic.ts). */
export function arithmeticQa(records: readonly RlRecord[]): ArithmeticQa[] {
  return records.map((r) => ({
    question: (r.row.prompt as { content: string }[])[0].content,
    answer: String((r.row.reward_model as { ground_truth: unknown }).ground_truth),
  }));
}

/** The share of the warm start's annotators who leave a trailing space after the sum ("95 "). */
const ARITHMETIC_SLOPPY_FRACTION = 0.7;

/** An annotator's answer: the sum, with a trailing space from a seeded 70% of them. */
export function sloppyAnswer(sum: string, rng: Rng): string {
  return rng.next() < ARITHMETIC_SLOPPY_FRACTION ? `${sum} ` : sum;
}

/** SFT rows {question, answer}: the built-in warm start's demonstrations. */
export function sloppyDemonstrations(problems: readonly ArithmeticQa[], seed: number): ArithmeticQa[] {
  const rng = new Rng(seed);
  return problems.map((p) => ({ question: p.question, answer: sloppyAnswer(p.answer, rng) }));
}

/**
 * A wrong answer to `question` (whose correct sum is `sum`) of the given kind: the SFT habit (the sum and a space),
 * a sum off by 1 to 3 (never negative, never the sum), or the sum after the question echoed back.
 */
export function rejectedAnswer(kind: RejectedKind, question: string, sum: string, rng: Rng): string {
  if (kind === 'trailing space') return `${sum} `;
  if (kind === 'extra text') return `${question}${sum}`;
  const off = 1 + Math.floor(rng.next() * 3);
  const value = Number(sum);
  return String(value - off >= 0 && rng.next() < 0.5 ? value - off : value + off);
}

/**
 * One pair per problem: chosen the bare sum, rejected a seeded kind — half of them the trailing space the SFT model
 * mostly answers with (the difference PPO must learn to prefer), the rest wrong sums and extra text in equal shares,
 * so the reward model also learns that the sum must be right.
 */
export function preferencePairs(problems: readonly ArithmeticQa[], seed: number): PreferencePairRow[] {
  const rng = new Rng(seed);
  return problems.map((p) => {
    const draw = rng.next();
    const kind: RejectedKind = draw < 0.5 ? 'trailing space' : draw < 0.75 ? 'off by some' : 'extra text';
    return {
      prompt: [{ role: 'user', content: p.question }],
      chosen: [{ role: 'assistant', content: p.answer }],
      rejected: [{ role: 'assistant', content: rejectedAnswer(kind, p.question, p.answer, rng) }],
    };
  });
}
