// The embedded default job: a tiny Qwen3-style model learns multi-digit addition — a supervised warm start
// first (this file), then PPO with a GAE critic and a rule reward (the trainer). Browser-safe: the caller
// provides the engine and receives progress through callbacks.
import type { Engine } from '../engine/index.ts';
import { CausalLm } from '../models/causal-lm.ts';
import { createParameterArena, uploadArenaTensors } from '../models/parameter-store.ts';
import { initialParameters } from '../models/init.ts';
import { tinyQwen3Config } from '../models/presets.ts';
import type { DecoderConfig } from '../models/hf-config.ts';
import { AdamWOptimizer } from './adamw-optimizer.ts';
import { SftTrainer, type SftExample, type SftStepResult } from './sft-trainer.ts';
import {
  arithmeticTokenizer, arithmeticPromptText, arithmeticResponseText, sampleArithmeticProblem, type ArithmeticTaskConfig,
} from './tasks/arithmetic.ts';
import { seededRandom } from '../engine/rng.ts';

export interface SftWarmStartConfig {
  seed: number;
  steps: number;
  batchSize: number;
  lr: number;
  task: ArithmeticTaskConfig;
}

export const DEFAULT_SFT_WARM_START: SftWarmStartConfig = {
  seed: 1,
  steps: 150,
  batchSize: 32,
  lr: 3e-3,
  task: { digits: 2 },
};

export function arithmeticExample(random: () => number, task: ArithmeticTaskConfig): SftExample {
  const problem = sampleArithmeticProblem(random, task);
  return {
    prompt: arithmeticTokenizer.encode(arithmeticPromptText(problem)),
    response: arithmeticTokenizer.encode(arithmeticResponseText(problem)),
  };
}

/** Longest prompt + response of the task, in tokens. */
export function arithmeticSequenceLength(task: ArithmeticTaskConfig): number {
  const widest = 10 ** task.digits - 1;
  const problem = { a: widest, b: widest, question: `${widest}+${widest}=`, answer: String(2 * widest) };
  return arithmeticTokenizer.encode(arithmeticPromptText(problem) + arithmeticResponseText(problem)).length;
}

export interface WarmStartResult {
  config: DecoderConfig;
  model: CausalLm;
  history: SftStepResult[];
}

export async function runSftWarmStart(engine: Engine, options: SftWarmStartConfig, onStep: (r: SftStepResult) => void): Promise<WarmStartResult> {
  const config = tinyQwen3Config(arithmeticTokenizer.vocabSize);
  const params = createParameterArena(engine, config, 'actor');
  uploadArenaTensors(engine, params, initialParameters(config, options.seed));
  const model = new CausalLm(engine, config, params);
  const optimizer = new AdamWOptimizer(engine, params, { lr: options.lr, betas: [0.9, 0.95], eps: 1e-8, weightDecay: 0.01, maxGradNorm: 1 });
  const T = arithmeticSequenceLength(options.task);
  const trainer = new SftTrainer(engine, model, optimizer, { B: options.batchSize, T, padId: arithmeticTokenizer.tokenId('<pad>') });
  const random = seededRandom(options.seed);
  const history: SftStepResult[] = [];
  for (let step = 0; step < options.steps; step++) {
    const examples = Array.from({ length: options.batchSize }, () => arithmeticExample(random, options.task));
    const lr = options.lr * Math.min(1, (step + 1) / 10) * (0.1 + 0.9 * 0.5 * (1 + Math.cos((Math.PI * step) / options.steps)));
    const result = await trainer.trainStep(examples, lr);
    history.push(result);
    onStep(result);
  }
  return { config, model, history };
}
