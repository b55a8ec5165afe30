// The built-in verifiable task: multi-digit addition in a chat format. A prompt is one user message
// "a+b="; the correct response is the sum followed by the end token. Rewards check the sum exactly, so the
// default job needs no reward model, no dataset download and no network.
import { CharTokenizer } from '../../models/char-tokenizer.ts';

export const ARITHMETIC_SPECIAL_TOKENS = ['<pad>', '<s>', '</s>', '<|user|>', '<|assistant|>'] as const;

export const arithmeticTokenizer = new CharTokenizer({
  specialTokens: ARITHMETIC_SPECIAL_TOKENS,
  characters: '0123456789+-*= ',
});

/** Chat template (Jinja, Hugging Face's apply_chat_template) that renders the prompts below. */
export const ARITHMETIC_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>' + message['content'] }}" +
  "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>' + message['content'] + '</s>' }}{% endif %}{% endfor %}" +
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

export function sampleArithmeticProblem(random: () => number, config: ArithmeticTaskConfig): ArithmeticProblem {
  const limit = 10 ** config.digits;
  return arithmeticProblem(Math.floor(random() * limit), Math.floor(random() * limit));
}

/** The prompt as the chat template renders it with add_generation_prompt. */
export function arithmeticPromptText(problem: ArithmeticProblem): string {
  return `<|user|>${problem.question}<|assistant|>`;
}

export function arithmeticResponseText(problem: ArithmeticProblem): string {
  return `${problem.answer}</s>`;
}
