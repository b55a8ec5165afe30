// A rollout batch of ragged rows as the rollout pads them (prompts left-padded to P, responses right-padded to R,
// pairs of rows sharing a group), with random tokens: for tests that feed the trainer's phases a batch without
// generating one.
import { Rng } from '../../engine/rng.ts';
import { positionsFromMask } from '../../models/token-batch.ts';
import type { RolloutBatch } from '../../ppo/generation/types.ts';

export function raggedRolloutBatch(a: {
  promptLengths: readonly number[];
  responseLengths: readonly number[];
  /** Padded widths. */
  P: number;
  R: number;
  vocabSize: number;
  seed: number;
  /** Old log-probs of the response tokens drawn in (-1.5, -0.5) after the tokens; zeros otherwise. */
  randomOldLogProbs?: boolean;
}): RolloutBatch {
  const { P, R, promptLengths, responseLengths } = a;
  const N = promptLengths.length;
  const rng = new Rng(a.seed);
  const token = () => 3 + Math.floor(rng.next() * (a.vocabSize - 3));
  const prompts = promptLengths.map((n) => Array.from({ length: P }, (_, t) => (t >= P - n ? token() : 0)));
  const responses = responseLengths.map((n) => Array.from({ length: R }, (_, t) => (t < n ? token() : 0)));
  const attentionMask = promptLengths.map((p, i) =>
    Array.from({ length: P + R }, (_, t) => (t < P ? (t >= P - p ? 1 : 0) : t - P < responseLengths[i] ? 1 : 0)),
  );
  return {
    groupIds: Array.from({ length: N }, (_, i) => i >> 1),
    promptLength: P,
    responseLength: R,
    prompts,
    responses,
    inputIds: prompts.map((p, i) => [...p, ...responses[i]]),
    attentionMask,
    positionIds: attentionMask.map((m, i) => [
      ...positionsFromMask(m.slice(0, P)),
      ...Array.from({ length: R }, (_, t) => promptLengths[i] + t),
    ]),
    responseMask: responseLengths.map((n) => Array.from({ length: R }, (_, t) => (t < n ? 1 : 0))),
    oldLogProbs: responseLengths.map((n) =>
      a.randomOldLogProbs
        ? Float32Array.from({ length: R }, (_, t) => (t < n ? -0.5 - rng.next() : 0))
        : new Float32Array(R),
    ),
    responseLengths: [...responseLengths],
    finishReasons: new Array(N).fill('eos'),
  };
}
