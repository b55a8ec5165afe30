// The built-in verifiable task: multi-digit addition in a chat format. A prompt is one user message
// "a+b="; the correct response is the sum followed by the end token. Rewards check the sum exactly, so the
// default job needs no reward model, no dataset download and no network. The task comes as what a user would
// bring: verl-schema rows (data_source "arithmetic") and a Hugging Face tokenizer (tokenizer.json with a chat
// template), so it runs through the same dataset, tokenizer and checkpoint code as real data.
import { CharTokenizer } from '../../models/char-tokenizer.ts';
import { builtinTokenizerFiles } from '../../models/word-level-tokenizer.ts';
import { Rng } from '../../engine/rng.ts';
import type { RlRecord } from '../data/dataset.ts';
import { ARITHMETIC_SPECIAL_TOKENS } from '../rewards/arithmetic.ts';

export const arithmeticTokenizer = new CharTokenizer({
  specialTokens: ARITHMETIC_SPECIAL_TOKENS,
  characters: '0123456789+-*= ',
});

/** Chat template (Jinja, Hugging Face's apply_chat_template) that renders the prompts below. */
export const ARITHMETIC_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>' + message['content'] }}" +
  "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>' + message['content'] + '</s>' }}{% endif %}{% endfor " +
  '%}' +
  "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";

export interface ArithmeticProblem {
  a: number;
  b: number;
  /** The user message. */
  question: string;
  /** The ground truth, as the reward checks it. */
  answer: string;
}

export interface ArithmeticTaskConfig {
  /** Operands are drawn uniformly from [0, 10^digits). */
  digits: number;
}

export function arithmeticProblem(a: number, b: number): ArithmeticProblem {
  return { a, b, question: `${a}+${b}=`, answer: String(a + b) };
}

export const ARITHMETIC_DATA_SOURCE = 'arithmetic';

/** tokenizer.json and tokenizer_config.json of the task's character vocabulary, as a checkpoint stores them. */
export function arithmeticTokenizerFiles(): { tokenizerJson: object; tokenizerConfig: Record<string, unknown> } {
  return builtinTokenizerFiles(arithmeticTokenizer, ARITHMETIC_CHAT_TEMPLATE);
}

function record(problem: ArithmeticProblem, split: string, index: number): RlRecord {
  return {
    where: `built-in arithmetic ${split} row ${index}`,
    row: {
      data_source: ARITHMETIC_DATA_SOURCE,
      prompt: [{ role: 'user', content: problem.question }],
      ability: 'math',
      reward_model: { style: 'rule', ground_truth: problem.answer },
      extra_info: { split, index },
    },
  };
}

/**
 * Disjoint train and validation sets of distinct problems, drawn with `seed`: validation accuracy measures
 * problems the model never trained on.
 */
export function arithmeticDataset(
  config: ArithmeticTaskConfig & { trainSize: number; valSize: number; seed: number },
): { train: RlRecord[]; val: RlRecord[] } {
  const limit = 10 ** config.digits;
  if (config.trainSize + config.valSize > limit * limit) {
    throw new Error(
      `arithmetic task: ${config.trainSize} + ${config.valSize} problems exceed the ${limit * limit} distinct ` +
        `${config.digits}-digit sums`,
    );
  }
  const rng = new Rng(config.seed);
  const seen = new Set<number>();
  const draw = () => {
    for (;;) {
      const a = Math.floor(rng.next() * limit);
      const b = Math.floor(rng.next() * limit);
      if (seen.has(a * limit + b)) continue;
      seen.add(a * limit + b);
      return arithmeticProblem(a, b);
    }
  };
  const val = Array.from({ length: config.valSize }, (_, i) => record(draw(), 'test', i));
  const train = Array.from({ length: config.trainSize }, (_, i) => record(draw(), 'train', i));
  return { train, val };
}
