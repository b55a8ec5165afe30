// The supervised batch of the warm start: the loss covers response tokens only, and with a response mask (a
// multi-turn demonstration) only the tokens the policy writes — an observation is context, never a target.
import { describe, it, expect } from 'vitest';
import { buildSftBatch } from '../../ppo/sft/sft-trainer.ts';

describe('SFT batch', () => {
  it('weights response targets equally, skipping masked observation tokens, with the mean over trained tokens', () => {
    const T = 8;
    const built = buildSftBatch(
      [
        { prompt: [5, 6], response: [7, 8, 2] },
        { prompt: [5], response: [9, 10, 11, 12, 2], responseMask: [1, 0, 0, 1, 1] },
      ],
      T,
      0,
    );
    // Position t predicts token t + 1; 3 + 3 trained targets.
    const weight = Math.fround(-1 / 6);
    // + 0 turns the −0 of untrained positions into 0
    const row = (b: number) => Array.from(built.lossWeights.subarray(b * T, (b + 1) * T), (w) => w + 0);
    expect(row(0)).toEqual([0, weight, weight, weight, 0, 0, 0, 0]);
    expect(row(1)).toEqual([weight, 0, 0, weight, weight, 0, 0, 0]);
    expect(Array.from(built.targets.subarray(T, T + 5))).toEqual([9, 10, 11, 12, 2]);
    expect(built.host.attentionMask[1]).toEqual([1, 1, 1, 1, 1, 1, 0, 0]);
  });

  it('rejects a mask that does not match the response', () => {
    expect(() => buildSftBatch([{ prompt: [1], response: [2, 3], responseMask: [1] }], 4, 0)).toThrow(
      /responseMask has 1 entries for 2 response tokens/,
    );
  });
});
