import { describe, it, expect } from 'vitest';
import { stepMetrics } from '../../ppo/metrics/step-metrics.ts';
import { tinyQwen3Config } from '../../models/presets.ts';
import type { Experience } from '../../ppo/phases/experience.ts';
import type { RolloutBatch } from '../../ppo/generation/types.ts';

/**
 * A batch of 4 samples, prompts left-padded to the batch's longest (5) under data.max_prompt_length 8, responses
 * right-padded to max_response_length R = 4. Sample 2 is aborted (no response token).
 */
function batch(): Omit<Experience, 'tensors'> {
  const N = 4,
    P = 5,
    R = 4;
  const promptLengths = [5, 3, 5, 2];
  const responseLengths = [4, 2, 0, 4];
  const attentionMask = promptLengths.map((p, i) => [
    ...Array(P)
      .fill(0)
      .map((_, t) => (t >= P - p ? 1 : 0)),
    ...Array(R)
      .fill(0)
      .map((_, t) => (t < responseLengths[i] ? 1 : 0)),
  ]);
  const responseMask = new Float32Array(N * R).map((_, k) => (k % R < responseLengths[Math.floor(k / R)] ? 1 : 0));
  const scores = [1, 0, 5, 1];
  // The score on each response's last token (the aborted one's on its first slot, as a reward manager would).
  const tokenLevelRewards = new Float32Array(N * R);
  scores.forEach((s, i) => (tokenLevelRewards[i * R + Math.max(0, responseLengths[i] - 1)] = s));
  const rollout = { attentionMask, responseLengths } as unknown as RolloutBatch;
  return {
    rollout,
    N,
    S: P + R,
    R,
    scores,
    responseMask,
    oldLogProbs: new Float32Array(N * R),
    rolloutLogProbs: null,
    sumPiSquared: null,
    refLogProbs: null,
    values: null,
    hasTeacherLogProbs: false,
    metrics: {},
    tokenLevelRewards,
    advantages: new Float32Array(N * R),
    returns: new Float32Array(N * R),
    rolloutIsWeights: null,
  };
}

describe('step metrics', () => {
  const metrics = stepMetrics({
    step: 1,
    experience: batch(),
    updateMetrics: {},
    timing: {},
    actorConfig: tinyQwen3Config(16),
    criticConfig: null,
    peakFlops: null,
    maxPromptLength: 8,
  });

  it(
    'a clip ratio is the share of rows as long as data.max_prompt_length / max_response_length (verl ' +
      'compute_data_metrics)',
    () => {
      // verl: mean(prompt_length == max_prompt_length) with prompts padded to data.max_prompt_length: none of 5, 3, 5,
      // 2 is 8.
      expect(metrics['prompt_length/clip_ratio']).toBe(0);
      // mean(response_length == max_response_length): 4, 2, 0, 4 against 4.
      expect(metrics['response_length/clip_ratio']).toBe(0.5);
      expect(metrics).toMatchObject({ 'prompt_length/mean': 15 / 4, 'prompt_length/max': 5, 'prompt_length/min': 2 });
      expect(metrics).toMatchObject({
        'response_length/mean': 10 / 4,
        'response_length/max': 4,
        'response_length/min': 0,
      });
    },
  );

  it(
    "reports verl's aborted samples (response length 0) and leaves them out of the score, reward and non-aborted " +
      'lengths',
    () => {
      expect(metrics['response/aborted_ratio']).toBe(0.25);
      expect(metrics['response_length_non_aborted/mean']).toBeCloseTo(10 / 3, 12);
      expect(metrics).toMatchObject({ 'response_length_non_aborted/max': 4, 'response_length_non_aborted/min': 2 });
      expect(metrics['response_length_non_aborted/clip_ratio']).toBeCloseTo(2 / 3, 12);
      expect(metrics['critic/score/mean']).toBeCloseTo(2 / 3, 6);
      expect(metrics).toMatchObject({
        'critic/score/max': 1,
        'critic/score/min': 0,
        'critic/rewards/max': 1,
        'critic/rewards/min': 0,
      });
      expect(metrics['critic/rewards/mean']).toBeCloseTo(2 / 3, 6);
    },
  );
});
