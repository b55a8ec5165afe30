import { describe, expect, it } from 'vitest';
import { pairwiseLossRef } from '../../kernels/ppo/pairwise-loss.ref.ts';
import { randomArray, expectClose } from '../support/arrays.ts';
import { numericGradient } from '../support/numeric-gradient.ts';

describe('pairwise-loss reference', () => {
  it('its gradient matches finite differences of its loss, margins included', () => {
    const P = 4;
    const T = 5;
    const values = Float64Array.from(randomArray(2 * P * T, 31, 3));
    const last = [4, 0, 2, 3, 1, 4, 4, 0];
    const margin = [0, 0.5, -1, 2];
    const { dValues } = pairwiseLossRef({ values, last, margin, P, T });
    expectClose(
      dValues,
      numericGradient(values, () => pairwiseLossRef({ values, last, margin, P, T }).loss),
      1e-8,
      1e-6,
      'dValues',
    );
  });

  it('is −log σ(r_c − r_r − m), stays finite for far-apart scores, and counts r_c > r_r as correct', () => {
    const T = 1;
    const values = [2, -1, -100, 0.5, 3, 100];
    const { loss, accuracy, margin } = pairwiseLossRef({
      values,
      last: [0, 0, 0, 0, 0, 0],
      margin: [1, 0, 0],
      P: 3,
      T,
    });
    const pairLosses = [Math.log1p(Math.exp(-(2 - 0.5 - 1))), Math.log1p(Math.exp(-(-1 - 3))), 200];
    expect(loss).toBeCloseTo(pairLosses.reduce((a, b) => a + b) / 3, 10);
    expect(accuracy).toBeCloseTo(1 / 3, 12);
    expect(margin).toBeCloseTo((1.5 - 4 - 200) / 3, 10);
  });
});
