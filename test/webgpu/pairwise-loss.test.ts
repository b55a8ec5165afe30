import { describe, it } from 'vitest';
import { gpuEngine } from '../support/gpu-engine.ts';
import { pairwiseLoss, PAIRWISE_STATS } from '../../kernels/ppo/pairwise-loss.ts';
import { pairwiseLossRef } from '../../kernels/ppo/pairwise-loss.ref.ts';
import { randomArray, expectClose, seededRandom } from '../support/arrays.ts';

describe('pairwise-loss kernel', () => {
  // P = 1: a single pair; P = 3, T = 7: odd shapes; P = 70: more pairs than the stats workgroup's lanes and
  // elements over many workgroups; scale 40 puts pairs far apart, where a naive log(σ) would overflow; gradScale
  // 0.25 is a micro-batch of four.
  for (const [P, T, scale, gradScale] of [
    [1, 1, 1, 1],
    [3, 7, 2, 0.25],
    [70, 13, 40, 1],
  ]) {
    it(
      `matches the reference: loss, accuracy, margin and gradient (P=${P}, T=${T}, gradScale ` + `${gradScale})`,
      async () => {
        const engine = await gpuEngine();
        const values = randomArray(2 * P * T, P * 100 + T, scale);
        const random = seededRandom(P + T);
        const last = Array.from({ length: 2 * P }, () => Math.floor(random() * T));
        const margin = Array.from({ length: P }, (_, p) => (p % 3 === 0 ? 0 : random()));
        const dValues = engine.tensorFrom('dValues', [2 * P, T], randomArray(2 * P * T, 9));
        const stats = engine.tensor('stats', [3]);
        pairwiseLoss(engine, {
          values: engine.tensorFrom('values', [2 * P, T], values),
          last: engine.tensorFrom('last', [2 * P], last, 'u32'),
          margin: engine.tensorFrom('margin', [P], margin),
          dValues,
          stats,
          P,
          T,
          gradScale,
        });
        const expected = pairwiseLossRef({ values, last, margin, P, T });
        expectClose(
          await engine.read(dValues),
          expected.dValues.map((g) => g * gradScale),
          1e-7,
          1e-5,
          'dValues',
        );
        const got = await engine.read(stats);
        expectClose(
          [got[PAIRWISE_STATS.loss], got[PAIRWISE_STATS.accuracy], got[PAIRWISE_STATS.margin]],
          [expected.loss, expected.accuracy, expected.margin],
          1e-5,
          1e-5,
          'stats',
        );
      },
    );
  }
});
