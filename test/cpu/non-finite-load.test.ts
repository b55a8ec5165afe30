// Files with NaN or Inf are refused where they are read, naming the file, the tensor and the position.
import { describe, it, expect } from 'vitest';
import type { ArenaEntry } from '../../engine/index.ts';
import { describeNonFinite, firstNonFinite } from '../../models/non-finite.ts';
import { decodeOptimizerState, encodeOptimizerState } from '../../ppo/training/optimizer-state.ts';

describe('non-finite values at load', () => {
  it('finds the first NaN or ±Infinity and names its row and column in a matrix', () => {
    expect(firstNonFinite(new Float32Array([0, 1, 2]))).toBe(-1);
    expect(firstNonFinite([0, Infinity, NaN])).toBe(1);
    expect(firstNonFinite([0, 1, -Infinity])).toBe(2);
    expect(describeNonFinite('model.embed_tokens.weight', [0, 0, 0, 0, 0, NaN], 5, [2, 3])).toBe(
      "tensor 'model.embed_tokens.weight' holds NaN at index 5 (row 1, column 2)",
    );
    expect(describeNonFinite('bias', [0, -Infinity], 1, [2])).toBe("tensor 'bias' holds -Infinity at index 1");
  });

  it('an optimizer state holding a non-finite moment is refused on resume', () => {
    const parameters = [{ name: 'w', shape: [2, 3] }] as unknown as ArenaEntry[];
    const m = new Float32Array(6);
    const v = new Float32Array(6);
    const bytes = () => encodeOptimizerState({ step: 3, m: new Map([['w', m]]), v: new Map([['w', v]]) });
    expect(decodeOptimizerState(bytes(), 'optimizer.safetensors', parameters).step).toBe(3);
    v[4] = Infinity;
    expect(() => decodeOptimizerState(bytes(), 'ckpt/actor/optimizer.safetensors', parameters)).toThrow(
      "ckpt/actor/optimizer.safetensors: tensor 'exp_avg_sq.w' holds Infinity at index 4; refusing to resume from a " +
        'non-finite optimizer state',
    );
  });
});
