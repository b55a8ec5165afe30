// Checks that the inputs of a run agree with each other when they load, not at the first rollout or reward:
// the data's rewards can score its rows, the model's positions hold a prompt and a response, and the
// tokenizer's ids fit the model's vocabulary.
import type { DecoderConfig } from '../../models/hf-config.ts';
import type { Tokenizer } from '../../models/tokenizer.ts';
import type { PpoConfig } from '../config.ts';
import type { RlExample } from '../data/dataset.ts';
import { computeScore } from '../rewards/index.ts';

/**
 * With the rule rewards (no custom_reward_function.path, no reward model), every row's data_source must have a
 * rule and its ground_truth the form that rule reads: each row is scored once with an empty response, so an
 * unknown data_source or a missing ground truth stops the run naming the row, before any model work.
 */
export function checkRewardsCanScore(
  config: Pick<PpoConfig, 'custom_reward_function' | 'reward_model'>,
  examples: readonly RlExample[],
): void {
  if (config.custom_reward_function.path !== null || config.reward_model.enable) return;
  for (const example of examples) {
    try {
      computeScore(example.dataSource, '', example.groundTruth, example.extraInfo);
    } catch (err) {
      throw new Error(`${example.where}: ${(err as Error).message}`, { cause: err });
    }
  }
}

/** The model can hold a whole sequence, and every id the tokenizer can produce is a row of its embedding. */
export function checkModelFitsRun(
  config: Pick<PpoConfig, 'data'>,
  model: DecoderConfig,
  tokenizer: Pick<Tokenizer, 'vocabSize'>,
): void {
  const { max_prompt_length: prompt, max_response_length: response } = config.data;
  if (prompt + response > model.maxPositionEmbeddings) {
    throw new Error(
      `data.max_prompt_length + data.max_response_length = ${prompt} + ${response} = ${prompt + response} exceeds ` +
        `the model's ` +
        `max_position_embeddings ${model.maxPositionEmbeddings} (config.json); lower them`,
    );
  }
  if (tokenizer.vocabSize > model.vocabSize) {
    throw new Error(
      `the tokenizer has ${tokenizer.vocabSize} tokens but the model's vocab_size is ${model.vocabSize} ` +
        `(config.json): ` +
        'its ids past the embedding would be read as other tokens — use the tokenizer the model was trained with ' +
        '(data.tokenizer)',
    );
  }
}
